/**
 * The front door: `train(config)` validates the config before any thread
 * starts (and with `strategy: 'auto'` profiles first), then runs it
 * (training-run.ts); `startTraining` returns the run's streams at once.
 */
import { resolveConfig } from '../config.js';
import type { TrainConfig } from '../config-types.js';
import type { StrategySpec } from '../pipeline/strategy.js';
import { chooseStrategy, type AutoChoice } from '../profiling/choose-strategy.js';
import { TrainingRun } from './training-run.js';
import { claimOutputs } from '../output/claim-outputs.js';
import { failedEvent, RunStreams } from './run-streams.js';
import { StopRequest } from './stop-request.js';
import type { StepMetrics, TrainHooks, TrainSummary, TrainingHandle } from './run-types.js';
export type { StepMetrics, TrainHooks, TrainSummary, TrainingHandle } from './run-types.js';

/** `stopRequest`: how `startTraining`'s handle (and the CLI's signals) stop or abort the run. */
export async function train(config: TrainConfig, hooks: TrainHooks = {}, stopRequest?: StopRequest): Promise<TrainSummary> {
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
    return await new TrainingRun(resolved, (config.strategy ?? 'sequential') as StrategySpec, hooks, autoNote, stopRequest).run();
  } finally {
    await lock.release();
  }
}


/**
 * Starts a run and returns its streams at once. No subscriber can end the process: a failed run sends a `failed`
 * event and completes the streams (`done` rejects); an exception in a subscriber becomes one `warning` event.
 *
 * @example
 * const run = startTraining({ model: 'alexnet-mini', strategy: 'two-group', link: '1gbps' });
 * run.timeline$.pipe(filter(s => s.kind === 'exchange')).subscribe(s => console.log(s.device, s.name, s.end - s.start));
 * const summary = await run.done;
 */
export function startTraining(config: TrainConfig, hooks: TrainHooks = {}): TrainingHandle {
  const streams = new RunStreams();
  const request = new StopRequest();
  const done = train(config, {
    ...hooks,
    onSpans: spans => { for (const s of spans) streams.span(s); hooks.onSpans?.(spans); },
    onStep: m => { streams.step(m); hooks.onStep?.(m); },
    onEvent: e => { streams.event(e); hooks.onEvent?.(e); },
  }, request);
  done.then(() => streams.complete(), err => {
    streams.fail(err);
    hooks.onEvent?.(failedEvent(err));
  }).catch(() => {}); // a hook that throws on the failure adds nothing to it
  done.catch(() => {}); // the caller handles `done`; the failure is also the last event
  return {
    timeline$: streams.timeline$, metrics$: streams.metrics$, events$: streams.events$, done,
    stop: () => request.stop(), abort: () => request.abort(),
  };
}

/** The library's front door: `start(config)` = `startTraining(config)`. */
export function start(config: TrainConfig, hooks: TrainHooks = {}): TrainingHandle {
  return startTraining(config, hooks);
}
