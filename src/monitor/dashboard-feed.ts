/**
 * What the dashboard shows, as messages: the run's configuration, one message per step (loss, accuracy, samples/s,
 * each device's compute, exchange and wait time, the overlap share), its events, the timeline picture of the last
 * steps and, at the end, the summary. A live run publishes them as they happen (trainer/run-dashboard.ts); a finished
 * run's are read back from its event log (`events.jsonl`, the same messages one per line). A page that connects late
 * gets what came before first (`snapshot`), then the rest as it comes.
 */
import type { RunEvent } from './run-event.js';
import type { StepValues } from './step-values.js';

/** A step on the page: the values every view shows, and per device (global rank) its exchange ms (its exchange spans
 * summed) and waiting ms. */
export interface DashboardStep extends StepValues {
  exchangeMs: number[];
  /** Per device: the bytes it handed to the exchange in the step (span.ts's `bytes`). */
  exchangeBytes: number[];
  waitMs: number[];
  /** Per device: the host it is on (0 on one host). */
  hosts: number[];
  /** Share of the step's exchange time that ran under backward (0 when nothing was exchanged). */
  overlap: number;
}

export interface DashboardSummary {
  steps: number;
  finalLoss: number;
  finalAccuracy: number;
  samplesPerSecond: number;
  wallSeconds: number;
  stoppedAt?: number;
  heldOutAccuracy?: number;
}

export type DashboardMessage =
  | { kind: 'config'; title: string; config: Record<string, unknown> }
  | { kind: 'step'; step: DashboardStep }
  | { kind: 'event'; event: RunEvent }
  | { kind: 'timeline'; svg: string }
  | { kind: 'summary'; summary: DashboardSummary }
  /** No more messages: the run ended (or the server closes). */
  | { kind: 'end' };

export type DashboardListener = (message: DashboardMessage) => void;

/**
 * Step messages kept for a page that connects late: past this many, every other one of them is let go (a long run's
 * curves keep their shape at half the points; the event log has every step).
 */
export const KEPT_STEPS = 20_000;

export class DashboardFeed {
  private kept: DashboardMessage[] = [];
  private steps = 0;
  private timeline: DashboardMessage | undefined;
  private readonly listeners = new Set<DashboardListener>();
  private ended = false;

  /** Everything so far, in order (the latest timeline only), for a page that connects now. */
  snapshot(): DashboardMessage[] {
    const out = [...this.kept];
    if (this.timeline) out.push(this.timeline);
    if (this.ended) out.push({ kind: 'end' });
    return out;
  }

  get listening(): number {
    return this.listeners.size;
  }

  get done(): boolean {
    return this.ended;
  }

  /** Calls `listener` with every message from now on; returns the unsubscribe. */
  subscribe(listener: DashboardListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  publish(message: DashboardMessage): void {
    if (this.ended) return;
    if (message.kind === 'end') this.ended = true;
    else if (message.kind === 'timeline') this.timeline = message;
    else this.kept.push(message);
    if (message.kind === 'step' && ++this.steps > KEPT_STEPS) this.thin();
    for (const listener of this.listeners) listener(message);
  }

  /** Every other step message let go (the last one stays). */
  private thin(): void {
    let nth = 0;
    const last = this.kept.findLastIndex(m => m.kind === 'step');
    this.kept = this.kept.filter((m, i) => m.kind !== 'step' || i === last || nth++ % 2 === 0);
    this.steps = this.kept.filter(m => m.kind === 'step').length;
  }
}

/**
 * `config`'s fields, JSON-safe, for the page: typed arrays as their size, functions left out, a field that cannot be
 * written as JSON (a model object, a cycle) as its kind.
 */
export function jsonSafe(config: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) {
    try {
      const text = JSON.stringify(value, (_key, v: unknown) => {
        if (typeof v === 'function' || typeof v === 'bigint') return undefined;
        if (ArrayBuffer.isView(v)) return `(${v.byteLength} bytes)`;
        return v;
      });
      if (text !== undefined) out[key] = JSON.parse(text);
    } catch {
      out[key] = `(${typeof value})`;
    }
  }
  return out;
}
