/**
 * Starting the threads on the laid-out run (the compute threads' buffers, a checkpoint restored, the comm threads'
 * exchange) and, at the end, finishing them (phase 5).
 */
import { commSlice } from '../actors/config-slices.js';
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import type { FinishedReport } from '../actors/protocol.js';
import { getTransport } from '../collectives/transport-registry.js';
import type { TrainingMethod } from '../methods/training-method.js';
import type { Checkpoint } from '../checkpoint/checkpoint-file.js';
import { hookStartsAfresh, restoreShared } from './run-checkpoints.js';
import { HookStateSlots } from './hook-state-slots.js';
import type { RunLedger } from './run-ledger.js';
import type { TrainHooks } from './run-types.js';
import type { RunThreads } from './run-threads.js';
import type { LaidOut } from './run-setup.js';
import { communicator, type JoinedWorld } from './run-world.js';

/** What starting the threads needs: the run's threads, configuration, method, world and the setup watchdog. */
export interface StartContext {
  threads: RunThreads;
  cfg: ResolvedConfig;
  method: TrainingMethod;
  world?: JoinedWorld;
  watchdogMs: number;
}

/**
 * Every compute thread gets the shared buffers, and the compute communicator when something communicates
 * between the compute threads: a method (Partial FC), or BatchNormalization layers on more than one device.
 */
export async function attach(x: StartContext, { buffers, groups, batchNormLayers }: LaidOut): Promise<void> {
  const { cfg, threads } = x;
  const needs = x.method.computeCommunicator(cfg);
  const batchNorm = batchNormLayers.length > 0 && cfg.devices > 1;
  if (batchNorm && cfg.batchNorm === 'sync' && !getTransport(cfg.transport).blocking) {
    throw new TandemError(
      'BAD_CONFIG',
      `the model's BatchNormalization layers (${batchNormLayers.join(', ')}) need a collective inside forward and ` +
        `backward for batchNorm 'sync', which transport '${cfg.transport}' cannot complete there; ` +
        "use batchNorm: 'local' (--batch-norm local) or the shared-memory transport",
    );
  }
  const compute =
    needs || batchNorm
      ? await communicator(cfg, x.world, 'compute', undefined, Math.max(needs?.stagingFloats ?? 0, 1 << 16))
      : undefined;
  const initialised = threads.replies.expect('initialised', undefined, x.watchdogMs);
  for (const a of threads.actors) {
    a.postCompute(
      { type: 'buffers', buffers, groups, collective: compute?.handles[a.identity.local] },
      compute?.transfer[a.identity.local],
    );
  }
  await initialised;
}

/** Phase 3: a checkpoint's shared parameters and optimizer state, and the devices' local state. */
export async function restore(threads: RunThreads, { buffers }: LaidOut, resume: Checkpoint): Promise<void> {
  restoreShared(buffers, resume);
  if (!resume.heads) return;
  const ranks = Math.max(...threads.actors.map(a => a.identity.rank)) + 1;
  if (resume.heads.length < ranks)
    throw new TandemError(
      'BAD_CHECKPOINT',
      `the checkpoint to resume from: field heads has ${resume.heads.length} local heads, and this run has ${ranks} ` +
        'devices (not a checkpoint this run wrote)',
    );
  const restored = threads.replies.expect('headRestored');
  for (const a of threads.actors) a.postCompute({ type: 'restoreHead', head: resume.heads[a.identity.rank] });
  await restored;
}

/**
 * Where the comm threads start: the first step, the checkpoint resumed (and where it was read), and whether hook state
 * is shared.
 */
export interface ExchangeStart {
  firstStep: number;
  resume?: Checkpoint;
  resumeSource?: string;
  /** The comm threads' hook state goes to the main thread at checkpoints (written here or on host 0). */
  shareHookState: boolean;
  hooks: TrainHooks;
}

/** The comm threads start, each with its end of the gradient communicator (and its hook state from the checkpoint). */
export async function startExchange(x: StartContext, { buffers, groups, layout }: LaidOut, s: ExchangeStart) {
  const { cfg, threads } = x;
  const gradients = await communicator(cfg, x.world, 'gradients', buffers, 1 << 16);
  const share = cfg.commHook !== undefined && s.shareHookState;
  if (share) threads.hookSlots = new HookStateSlots(threads.actors.map(a => a.identity.rank));
  const afresh = s.resume && hookStartsAfresh(cfg, s.resume);
  if (afresh) s.hooks.onEvent?.({ type: 'warning', step: s.resume!.step, message: afresh });
  for (const a of threads.actors) {
    const hookState = cfg.commHook && {
      share,
      restore: s.resume?.commHook?.ranks[a.identity.rank],
      source: s.resumeSource,
    };
    a.startComm(
      {
        type: 'start',
        device: a.identity,
        config: commSlice(cfg), // the thread's slice, not the whole config
        control: threads.controlBuffer,
        buffers,
        groups,
        variables: layout.variables,
        collective: gradients.handles[a.identity.local],
        firstStep: s.firstStep,
        hookState,
      },
      gradients.transfer[a.identity.local],
    );
  }
}

/** Phase 5: every device finishes (the export device exports its model); every comm report is in. */
export async function finish(
  x: Pick<StartContext, 'threads' | 'cfg' | 'method'>,
  ledger: RunLedger,
  groupCount: number,
  steps: { firstStep: number; lastStep: number },
): Promise<FinishedReport[]> {
  const { cfg, threads } = x;
  const { firstStep, lastStep } = steps;
  const exporter = x.method.exportDevice(cfg);
  const finished = threads.replies.expect('finished');
  for (const a of threads.actors) {
    a.postCompute({
      type: 'finish',
      lastStep,
      exportModel: a.identity.rank === exporter.device && (cfg.out !== undefined || exporter.always),
    });
  }
  const fin = await finished;
  await ledger.allExchangesReported((lastStep - firstStep + 1) * groupCount, lastStep);
  threads.control.stop(); // comm threads still waiting for a later step (after a stop) leave now
  return fin;
}
