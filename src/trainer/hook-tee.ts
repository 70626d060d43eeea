/**
 * A run's own observers (TensorBoard's writer, the dashboard) put in front of the hooks a caller gave: each sees a
 * step's metrics, a batch of spans and an event first, then the given hook does.
 */
import type { RunEvent } from '../monitor/run-event.js';
import type { Span } from '../monitor/span.js';
import type { StepMetrics, TrainHooks } from './run-types.js';

export interface HookTap {
  step?(m: StepMetrics): void;
  spans?(spans: Span[]): void;
  event?(e: RunEvent): void;
}

/** `hooks` with `tap` called before each of onStep, onSpans and onEvent. */
export function teeHooks(hooks: TrainHooks, tap: HookTap): TrainHooks {
  return {
    ...hooks,
    onStep: m => {
      tap.step?.(m);
      hooks.onStep?.(m);
    },
    onSpans: spans => {
      tap.spans?.(spans);
      hooks.onSpans?.(spans);
    },
    onEvent: e => {
      tap.event?.(e);
      hooks.onEvent?.(e);
    },
  };
}
