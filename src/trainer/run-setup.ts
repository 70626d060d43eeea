/**
 * Set-up, phases 1 and 2: spawn one device actor per local device (each builds its replica and reports its
 * variables), then lay out where everything lives: exchange groups, shared buffers, the data loader.
 */
import { updatesOnCompute } from '../actors/inline-update.js';
import { computeSlice } from '../actors/config-slices.js';
import type { ResolvedConfig } from '../config-types.js';
import type { EngineDevice } from '../engine/engine.js';
import { TandemError } from '../errors.js';
import { DeviceActor } from '../actors/device-actor.js';
import {
  allocateModelBuffers,
  allocateParamsBf16,
  optimizerStateOf,
  type SharedBuffers,
} from '../actors/shared-buffers.js';
import type { WeightShape } from '../actors/protocol.js';
import { StepPreimage } from '../actors/step-preimage.js';
import { isWorkerOutOfMemory, outOfMemoryWords } from '../actors/worker-memory.js';
import { ShardLoadError } from '../data/shard-loader.js';
import { allocateInputBuffers } from '../data/input-slots.js';
import { sampleSize } from '../data/dataset.js';
import { layoutParameters, type ParameterGroup, type ParameterLayout } from '../model/parameter-layout.js';
import { chunksOf } from '../pipeline/priority-schedule.js';
import { checkLinkHolds } from '../pipeline/link-model.js';
import { exchangeGroups, MAX_GROUPS, type StrategySpec } from '../pipeline/strategy.js';
import { fillInitialOptimizerState, optimizerStateSlots } from '../optim/flat-optimizer.js';
import type { TrainingMethod } from '../methods/training-method.js';
import { globalRank } from '../world/topology.js';
import type { RunThreads } from './run-threads.js';

/** Phase 1's result: the model every replica built (trainable weights in `layout`, non-trainable ones in `state`). */
export interface Built {
  weights: WeightShape[];
  layout: ParameterLayout;
  state: WeightShape[];
  stateTotal: number;
  batchNormLayers: string[];
  /** Each layer's class and settings (model/layer-settings.ts). */
  layers: string[];
  /** Per local device, the accelerator its engine opened (webgpu); undefined on the CPU engines. */
  engineDevices?: EngineDevice[];
}

/** Phase 2's result: where everything lives. */
export interface LaidOut extends Built {
  groups: ParameterGroup[];
  buffers: SharedBuffers;
  load(step: number): Promise<void>;
}

/** Phase 1: one actor per local device; each builds its replica and reports its variables. */
export async function spawn(threads: RunThreads, cfg: ResolvedConfig, watchdogMs: number): Promise<Built> {
  threads.throwIfEnded();
  const built = threads.replies.expect('built', undefined, watchdogMs);
  for (let d = 0; d < cfg.topology.localDevices; d++) {
    const actor = new DeviceActor({ local: d, rank: globalRank(cfg.topology, d) }, threads.control, {
      onCompute: m => threads.onCompute(m),
      onComm: m => threads.onComm(m),
      onFailure: e => threads.fail(e),
    });
    threads.actors.push(actor);
    actor.postCompute({
      type: 'init',
      device: actor.identity,
      config: computeSlice(cfg), // the thread's slice, not the whole config
      control: threads.controlBuffer,
      groupCount: MAX_GROUPS,
    });
  }
  const reports = await built;
  const { weights, state, batchNormLayers, layers } = reports[0];
  const shapes = (ws: WeightShape[][]) => JSON.stringify(ws.map(w => w.map(v => v.shape)));
  for (const r of reports) {
    if (shapes([r.weights, r.state]) !== shapes([weights, state])) {
      throw new TandemError(
        'BAD_CONFIG',
        `device ${r.device} built a model with different variables than device ${reports[0].device}; ` +
          'the model factory must be deterministic in shape',
      );
    }
  }
  const stateTotal = state.reduce((n, w) => n + w.shape.reduce((a, b) => a * b, 1), 0);
  const devices = reports.map(r => r.engineDevice);
  const engineDevices = devices.every((d): d is EngineDevice => d !== undefined) ? devices : undefined;
  return { weights, layout: layoutParameters(weights), state, stateTotal, batchNormLayers, layers, engineDevices };
}

/** An emulated link slower than the stall watchdog allows is refused before step 1 (it would fail as STALLED). */
export function checkLink(
  cfg: Pick<ResolvedConfig, 'link' | 'exchange' | 'commHook' | 'devices' | 'stallTimeoutMs'>,
  groups: readonly ParameterGroup[],
): void {
  const { link, exchange, commHook, devices, stallTimeoutMs } = cfg;
  if (!link) return;
  const chunked = exchange.order === 'priority' && !commHook; // with a hook, groups are not cut
  const holds = groups.flatMap(g => (chunked ? chunksOf(g, exchange.chunkFloats) : [g]).map(u => u.end - u.start));
  checkLinkHolds(link, devices, holds, stallTimeoutMs);
}

/**
 * Whether the comm threads keep a bf16 copy of the parameters (actors/params-mirror.ts): precision bf16 on the native
 * engine, where only the comm thread's update writes them between steps (no local heads, no shards, not elastic).
 */
function keepsParamsBf16(cfg: ResolvedConfig, method: TrainingMethod, elastic: boolean | undefined): boolean {
  return (
    cfg.precision === 'bf16' &&
    cfg.backend === 'native' &&
    !method.localState &&
    cfg.localUpdate !== 'shard' &&
    !elastic &&
    process.env.TANDEM_PARAMS_BF16 !== 'off'
  );
}

/** What phase 2 needs besides the model: the run's threads, method, strategy, and whether checkpoints are written. */
export interface LayOutContext {
  threads: RunThreads;
  cfg: ResolvedConfig;
  method: TrainingMethod;
  strategy: StrategySpec;
  checkpoints: boolean;
  /** An elastic run: the pre-update copy keeps every group, so that a completed step can be rolled back. */
  elastic?: boolean;
}

/** Phase 2: exchange groups, shared buffers, the data loader. */
export async function layOut(
  { threads, cfg, method, strategy, checkpoints, elastic }: LayOutContext,
  built: Built,
): Promise<LaidOut> {
  const groups = exchangeGroups(strategy, built.layout, cfg.strategyOptions);
  const local = cfg.topology.localDevices;
  const targetFloats = cfg.targetShape ? sampleSize(cfg.targetShape) : 1;
  const input = allocateInputBuffers(local, cfg.perDevice, sampleSize(cfg.sampleShape), targetFloats);
  const slots = optimizerStateSlots(cfg.optimizer);
  const buffers: SharedBuffers = {
    control: threads.controlBuffer,
    ...allocateModelBuffers(local, built.layout.total, slots, built.stateTotal),
    ...input,
    // The pre-update copy serves the abort checkpoint, written when the run's whole state is in shared memory.
    preimage:
      checkpoints && !method.localState && built.stateTotal === 0 && !cfg.commHook
        ? StepPreimage.allocate(groups.length, built.layout.total, slots)
        : undefined,
    ...(elastic ? { preimageEveryGroup: true } : {}),
    ...(updatesOnCompute(cfg, elastic === true) ? { updatesOnCompute: true } : {}),
    ...(keepsParamsBf16(cfg, method, elastic) ? allocateParamsBf16(local, built.layout.total, groups.length) : {}),
  };
  // adagrad's accumulator
  for (let d = 0; d < local; d++) fillInitialOptimizerState(cfg.optimizer, optimizerStateOf(buffers, d));
  threads.loader = await method.createLoader(cfg, input);
  if (threads.failure) {
    // the run ended while the loader started: endThreads may not have seen it
    const loader = threads.loader;
    threads.loader = undefined;
    await loader.close();
    throw threads.failure;
  }
  const loader = threads.loader;
  const load = (step: number) => loader.fill(step).catch((err: unknown) => loadError(err, step));
  return { ...built, groups, buffers, load };
}

/** A data loader's failure at `step`, as the run reports it. */
function loadError(err: unknown, step: number): never {
  const device = err instanceof ShardLoadError ? err.device : -1;
  const cause = err instanceof ShardLoadError ? err.cause : err;
  const [code, what] = isWorkerOutOfMemory(cause)
    ? (['OUT_OF_MEMORY', outOfMemoryWords('its data loader thread')] as const)
    : (['DATA_FAILED', (err as Error).message] as const);
  throw new TandemError(
    code,
    `device ${device} failed at step ${step} in phase load (data loader): ${what}`,
    { device, step, phase: 'load' },
    { cause },
  );
}
