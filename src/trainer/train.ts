/**
 * The front door: `train(config)` validates the config before any thread
 * starts (and with `strategy: 'auto'` profiles first), then runs it
 * (training-run.ts); `startTraining` returns the run's streams at once.
 */
import { resolveConfig } from '../config.js';
import type { TrainConfig } from '../config-types.js';
import type { StrategySpec } from '../pipeline/strategy.js';
import { Subject } from 'rxjs';
import type { Span } from '../monitor/span.js';
import type { RunEvent } from '../monitor/run-event.js';
import { chooseStrategy, type AutoChoice } from '../profiling/choose-strategy.js';
import { TrainingRun } from './training-run.js';
import { claimOutputs } from '../output/claim-outputs.js';
import type { StepMetrics, TrainHooks, TrainSummary, TrainingHandle } from './run-types.js';
export type { StepMetrics, TrainHooks, TrainSummary, TrainingHandle } from './run-types.js';

export async function train(config: TrainConfig, hooks: TrainHooks = {}): Promise<TrainSummary> {
  const checked = await resolveConfig(config); // bad input fails before any output is touched or thread started
  const lock = await claimOutputs(checked, message => hooks.onEvent?.({ type: 'warning', step: 0, message }));
  try {
    let auto: AutoChoice | undefined;
    if (config.strategy === 'auto') {
      auto = await chooseStrategy(config, train);
      hooks.onAutoChoice?.(auto);
      hooks.onEvent?.({ type: 'auto', strategy: auto.strategy, splitLayer: auto.splitLayer, reason: auto.reason });
      config = { ...config, strategy: auto.strategy, splitLayer: auto.splitLayer };
    }
    const resolved = auto ? await resolveConfig(config) : checked;
    const autoNote = auto && { strategy: auto.strategy, splitLayer: auto.splitLayer, reason: auto.reason };
    return await new TrainingRun(resolved, (config.strategy ?? 'sequential') as StrategySpec, hooks, autoNote).run();
  } finally {
    await lock.release();
  }
}


/**
 * Starts a run and returns its streams at once.
 *
 * @example
 * const run = startTraining({ model: 'alexnet-mini', strategy: 'two-group', link: '1gbps' });
 * run.timeline$.pipe(filter(s => s.kind === 'exchange')).subscribe(s => console.log(s.device, s.name, s.end - s.start));
 * const summary = await run.done;
 */
export function startTraining(config: TrainConfig, hooks: TrainHooks = {}): TrainingHandle {
  const timeline$ = new Subject<Span>();
  const metrics$ = new Subject<StepMetrics>();
  const events$ = new Subject<RunEvent>();
  let stopRequested = false;
  const done = (async () => {
    return train(config, {
      ...hooks,
      shouldStop: () => stopRequested || hooks.shouldStop?.() === true,
      onSpans: spans => { for (const s of spans) timeline$.next(s); hooks.onSpans?.(spans); },
      onStep: m => { metrics$.next(m); hooks.onStep?.(m); },
      onEvent: e => { events$.next(e); hooks.onEvent?.(e); },
    });
  })();
  done.then(() => { timeline$.complete(); metrics$.complete(); events$.complete(); },
    err => { timeline$.error(err); metrics$.error(err); events$.error(err); });
  done.catch(() => {}); // the caller handles `done`; the streams carry the error too
  return { timeline$: timeline$.asObservable(), metrics$: metrics$.asObservable(), events$: events$.asObservable(), done, stop: () => { stopRequested = true; } };
}

/** The library's front door: `start(config)` = `startTraining(config)`. */
export function start(config: TrainConfig, hooks: TrainHooks = {}): TrainingHandle {
  return startTraining(config, hooks);
}
