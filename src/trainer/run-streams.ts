/**
 * The three streams of a started run — `timeline$`, `metrics$`, `events$` —
 * built so that no subscriber can end the host process:
 * - a failed run sends a `failed` event and then completes every stream
 *   (streams never call `error`; `done` rejects with the error);
 * - an exception thrown by a subscriber (or by an operator piped from a
 *   stream) is caught and reported once per subscriber as a `warning` event;
 *   training goes on.
 * Emissions are trampolined: a warning raised while a value is being delivered
 * goes out after that delivery, so every subscriber sees events in one order.
 */
import { Subject, type Observable } from '#rxjs';
import { TandemError } from '../errors.js';
import { GuardedObservable } from '../monitor/guarded-observable.js';
import type { RunEvent } from '../monitor/run-event.js';
import type { Span } from '../monitor/span.js';
import type { StepMetrics } from './run-types.js';

export class RunStreams {
  private readonly timeline = new Subject<Span>();
  private readonly metrics = new Subject<StepMetrics>();
  private readonly events = new Subject<RunEvent>();
  private readonly queue: (() => void)[] = [];
  private emitting = false;
  private lastStep = 0;

  readonly timeline$: Observable<Span> = this.guarded('timeline$', this.timeline);
  readonly metrics$: Observable<StepMetrics> = this.guarded('metrics$', this.metrics);
  readonly events$: Observable<RunEvent> = this.guarded('events$', this.events);

  span(s: Span): void {
    this.emit(() => this.timeline.next(s));
  }
  step(m: StepMetrics): void {
    this.lastStep = m.step;
    this.emit(() => this.metrics.next(m));
  }
  event(e: RunEvent): void {
    this.emit(() => this.events.next(e));
  }

  /** The run ended: complete every stream. */
  complete(): void {
    this.emit(() => {
      this.timeline.complete();
      this.metrics.complete();
      this.events.complete();
    });
  }

  /** The run failed: a `failed` event, then every stream completes. */
  fail(err: unknown): void {
    this.event(failedEvent(err));
    this.complete();
  }

  private guarded<T>(name: string, subject: Subject<T>): Observable<T> {
    return new GuardedObservable<T>(
      name,
      (err, stream) => this.subscriberFailed(err, stream),
      subscriber => subject.subscribe(subscriber),
    );
  }

  private subscriberFailed(err: unknown, stream: string): void {
    const what = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    this.event({
      type: 'warning',
      step: this.lastStep,
      message:
        `a subscriber of ${stream} threw ${what}; training goes on (further exceptions of this subscriber ` +
        `are not reported)`,
    });
  }

  /** Runs `deliver` now, or after the delivery in progress (a subscriber's warning raised during one). */
  private emit(deliver: () => void): void {
    this.queue.push(deliver);
    if (this.emitting) return;
    this.emitting = true;
    try {
      for (let next = this.queue.shift(); next; next = this.queue.shift()) next();
    } finally {
      this.emitting = false;
    }
  }
}

/** The `failed` event of an error: its code, message and where it happened, as plain data. */
export function failedEvent(err: unknown): Extract<RunEvent, { type: 'failed' }> {
  if (err instanceof TandemError) return { type: 'failed', code: err.code, message: err.message, ...err.context };
  return { type: 'failed', message: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
}
