/**
 * The front door: `train(config)` validates the config before any thread
 * starts (and with `strategy: 'auto'` profiles first: across hosts, host 0
 * profiles and every host runs its choice), then runs it
 * (training-run.ts and its parts); `startTraining` returns the run's streams at once.
 */
import { resolveConfig } from '../config.js';
import type { ResolvedConfig, TrainConfig } from '../config-types.js';
import type { StrategyName, StrategySpec } from '../pipeline/strategy.js';
import { chooseStrategy, withoutAutoHook, type AutoChoice } from '../profiling/choose-strategy.js';
import { linkBitsPerSecond } from '../profiling/link-fit.js';
import type { RunTrial } from '../profiling/profile-model.js';
import { decideOnHost0, type Decided, type HostsAtStart } from '../world/decide-on-host0.js';
import type { StoreServer } from '../collectives/gloo/tcp-store-server.js';
import { runElastic } from './elastic-run.js';
import { agreeOnStreamedEpoch } from './agree-streamed-epoch.js';
import { elasticOf } from '../world/elastic-config.js';
import { claimOutputs } from '../output/claim-outputs.js';
import { failedEvent, RunStreams } from './run-streams.js';
import { StopRequest } from './stop-request.js';
import { withTensorBoard } from './run-tensorboard.js';
import { withDashboard } from './run-dashboard.js';
import { TandemError } from '../errors.js';
import { optionsForPickedHook } from '../pipeline/resolve-comm-hook.js';
import type { AutoSummary, TrainHooks, TrainSummary, TrainingHandle } from './run-types.js';
export type {
  EpochEnd,
  HostStepShare,
  RunHosts,
  StepMetrics,
  TrainHooks,
  TrainSummary,
  TrainingHandle,
} from './run-types.js';

/** `stopRequest`: how `startTraining`'s handle (and the CLI's signals) stop or abort the run. */
export async function train(
  config: TrainConfig,
  hooks: TrainHooks = {},
  stopRequest?: StopRequest,
): Promise<TrainSummary> {
  hooks = checkedHooks(hooks);
  const checked = await resolveConfig(config); // bad input fails before any output is touched or thread started
  const lock = await claimOutputs(checked, message => hooks.onEvent?.({ type: 'warning', step: 0, message }));
  for (const message of [...(checked.dataWarnings ?? []), checked.inputWarning, checked.optimizerWarning])
    if (message) hooks.onEvent?.({ type: 'warning', step: 0, message });
  // Host 0 alone writes the TensorBoard event files, as it writes the summary and trace.
  const board =
    config.tensorboard && checked.topology.process === 0 ? withTensorBoard(config.tensorboard, hooks) : null;
  if (board) hooks = board.hooks;
  // And serves the dashboard, and writes the event log into its locked --out.
  const realOut = lock.placed(checked).out;
  const dashboard =
    checked.topology.process === 0 && (config.dashboard !== undefined || realOut !== undefined)
      ? await withDashboard(config, realOut, hooks).catch(async err => {
          await board?.close();
          await lock.release();
          throw err;
        })
      : null;
  if (dashboard) hooks = dashboard.hooks;
  let served: StoreServer | undefined;
  try {
    let autoNote: AutoNote | undefined;
    if (config.strategy === 'auto') {
      ({ value: autoNote, server: served } = await pickStrategy(config, checked, hooks));
      config = withChoice(config, autoNote);
    }
    // Written under the real paths locked, not through the names given (claim-outputs.ts).
    const placed = lock.placed(autoNote ? await resolveConfig(config) : checked);
    // Several hosts streaming a data module: the epoch every host trains, agreed before step 1 (uneven datasets)
    const agreed = await agreeOnStreamedEpoch(placed, config, served);
    served = agreed.served;
    if (agreed.warning) hooks.onEvent?.({ type: 'warning', step: 0, message: agreed.warning });
    // none named: the one the config resolved to (defaultStrategy), kept by every generation of an elastic run
    const chosen: TrainConfig = { ...config, strategy: config.strategy ?? (agreed.cfg.strategy as StrategyName) };
    const summary = await runElastic({
      cfg: agreed.cfg,
      strategy: chosen.strategy as StrategySpec,
      ...{ hooks, auto: autoNote, stopRequest, served, elastic: elasticOf(config, agreed.cfg) },
      resolveFor: async (hosts, hostRank) => lock.placed(await resolveConfig(configFor(chosen, hosts, hostRank))),
    });
    dashboard?.finish(summary);
    const { out, trace, checkpointDir } = checked;
    return { ...summary, config: { ...summary.config, out, trace, checkpointDir } }; // as the user named them
  } catch (err) {
    dashboard?.fail(err);
    throw err;
  } finally {
    await dashboard?.close();
    await board?.close();
    await served?.close();
    await lock.release();
  }
}

type AutoNote = AutoSummary;

/** An elastic run's next generation: the same run for the hosts that remain (one host: no rendezvous). */
function configFor(config: TrainConfig, hosts: number, hostRank: number): TrainConfig {
  if (hosts > 1) return { ...config, hosts, hostRank };
  return { ...config, hosts: 1, hostRank: 0, rendezvous: undefined, minHosts: undefined };
}

const HOOK_NAMES = [
  'onStepApplied',
  'onStep',
  'onSpans',
  'onEvent',
  'shouldStop',
  'onAutoChoice',
  'atEpochEnd',
  'onHostStep',
  'atHostsMet',
] as const;

/** `train(config, hooks)`'s hooks: an object of functions (null: none), checked before anything starts. */
function checkedHooks(hooks: TrainHooks | null | undefined): TrainHooks {
  if (hooks === null || hooks === undefined) return {};
  if (typeof hooks !== 'object' || Array.isArray(hooks)) {
    throw new TandemError(
      'BAD_CONFIG',
      `hooks: expected an object of callbacks (${HOOK_NAMES.join(', ')}), found ` +
        `${Array.isArray(hooks) ? 'an array' : typeof hooks}`,
    );
  }
  for (const name of HOOK_NAMES) {
    const hook: unknown = hooks[name];
    if (hook !== undefined && typeof hook !== 'function')
      throw new TandemError(
        'BAD_CONFIG',
        `hooks.${name}: expected a function, found ${hook === null ? 'null' : typeof hook}`,
      );
  }
  return hooks;
}

/** The config with auto's choice in place of `auto` (and of `commHook: 'auto'`). */
function withChoice(config: TrainConfig, note: AutoNote): TrainConfig {
  const { chunkFloats: _chunk, ...picked } = note.commHook === undefined ? withoutAutoHook(config) : config;
  void _chunk;
  // auto's own options (the AlexNet-like shares; the bucket caps unless buckets was picked) served the choice
  const { splitLayer: _s, bucketCapMB, firstBucketMB, timeShare: _t, paramShare: _p, ...rest } = picked;
  void [_s, _t, _p];
  return {
    ...rest,
    ...(note.strategy === 'buckets' ? { bucketCapMB, firstBucketMB } : {}),
    strategy: note.strategy as StrategyName,
    splitLayer: note.splitLayer,
    forwardWait: note.forwardWait,
    exchangeOrder: note.exchangeOrder,
    ...(note.chunkFloats !== undefined ? { chunkFloats: note.chunkFloats } : {}),
    ...(note.commHook !== undefined
      ? { commHook: note.commHook, commHookOptions: optionsForPickedHook(note.commHook, config.commHookOptions) }
      : {}),
  };
}

/** What the summary keeps of auto's choice. */
function noteOf(auto: AutoChoice): AutoNote {
  const link = auto.link && {
    alphaMs: auto.link.alphaMs,
    bitsPerSecond: linkBitsPerSecond(auto.link),
    source: auto.link.source,
    samples: auto.link.samples,
  };
  return {
    strategy: auto.strategy,
    splitLayer: auto.splitLayer,
    forwardWait: auto.forwardWait,
    exchangeOrder: auto.exchangeOrder,
    chunkFloats: auto.chunkFloats,
    commHook: auto.commHook,
    predictedMs: auto.predictedMs,
    reason: auto.reason,
    link,
    cpu: { ...auto.cpu, cpuMsPerStep: auto.cpuMsPerStep, bound: auto.cpuBound },
    candidates: auto.candidates.map(c => ({ key: c.key, predictedMs: c.predictedMs })),
  };
}

/**
 * The profiler's calibration run (`train`); several hosts: every host starts its own at once (a meeting point), so
 * that where hosts share a machine's cores each measures its compute and CPU under the others' load, as in the run.
 */
function trialOf(hosts?: HostsAtStart): RunTrial {
  if (!hosts) return train;
  return async (config, trialHooks) => {
    await hosts.meet(
      'the calibration run of --strategy auto',
      'every host runs the same command: a host without --strategy auto never profiles',
    );
    return train(config, trialHooks);
  };
}

/**
 * `strategy: 'auto'`: profile and choose. Several hosts: host 0 alone profiles and reports the choice; every host runs
 * it (host 0 serves the rendezvous store from then on: `server`, for the run).
 */
async function pickStrategy(
  config: TrainConfig,
  checked: ResolvedConfig,
  hooks: TrainHooks,
): Promise<Decided<AutoNote>> {
  const choose = async (hosts?: HostsAtStart): Promise<AutoNote> => {
    const auto = await chooseStrategy(config, trialOf(hosts), {}, hosts?.link, hosts?.hostsOnMachine);
    hooks.onAutoChoice?.(auto);
    hooks.onEvent?.({ type: 'auto', strategy: auto.strategy, splitLayer: auto.splitLayer, reason: auto.reason });
    return noteOf(auto);
  };
  if (!checked.rendezvous) return { value: await choose() };
  // The other hosts profile too, at the same time, and discard it: where hosts share a machine (the hosts bench, tests)
  // host 0 then measures its compute under the load the run will have.
  const decided = await decideOnHost0(checked, choose, true, hosts =>
    chooseStrategy(config, trialOf(hosts), {}, hosts.link, hosts.hostsOnMachine),
  );
  if (checked.topology.process === 0) return decided;
  return { ...decided, value: { ...decided.value, reason: `host 0 chose: ${decided.value.reason}` } };
}

/**
 * Starts a run and returns its streams at once. No subscriber can end the process: a failed run sends a `failed`
 * event and completes the streams (`done` rejects); an exception in a subscriber becomes one `warning` event.
 *
 * @example
 * import { filter } from 'rxjs';
 * import { startTraining } from 'tandem';
 *
 * const run = startTraining({ model: 'alexnet-mini', strategy: 'two-group', link: '1gbps' });
 * run.timeline$
 *   .pipe(filter(s => s.kind === 'exchange'))
 *   .subscribe(s => console.log(s.device, s.name, s.end - s.start));
 * const summary = await run.done;
 */
export function startTraining(config: TrainConfig, hooks: TrainHooks = {}): TrainingHandle {
  const streams = new RunStreams();
  const request = new StopRequest();
  let given: TrainHooks = {},
    badHooks: unknown;
  try {
    given = checkedHooks(hooks);
  } catch (err) {
    badHooks = err; // `done` rejects with it, as with a bad config
  }
  const done =
    badHooks !== undefined
      ? Promise.reject(badHooks)
      : train(
          config,
          {
            ...given,
            onSpans: spans => {
              for (const s of spans) streams.span(s);
              given.onSpans?.(spans);
            },
            onStep: m => {
              streams.step(m);
              given.onStep?.(m);
            },
            onEvent: e => {
              streams.event(e);
              given.onEvent?.(e);
            },
          },
          request,
        );
  done
    .then(
      () => streams.complete(),
      err => {
        streams.fail(err);
        given.onEvent?.(failedEvent(err));
      },
    )
    .catch(() => {}); // a hook that throws on the failure adds nothing to it
  done.catch(() => {}); // the caller handles `done`; the failure is also the last event
  return {
    timeline$: streams.timeline$,
    metrics$: streams.metrics$,
    events$: streams.events$,
    done,
    stop: () => request.stop(),
    abort: () => request.abort(),
  };
}

/** The library's front door: `start(config)` = `startTraining(config)`. */
export function start(config: TrainConfig, hooks: TrainHooks = {}): TrainingHandle {
  return startTraining(config, hooks);
}
