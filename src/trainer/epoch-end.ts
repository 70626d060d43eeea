/**
 * The `atEpochEnd` hook's call: after an epoch's last step, once every device applied it, the hook gets the epoch and
 * the weights on request (device 0's parameters from shared memory, its non-trainable weights from its thread), and
 * says whether the run ends there. The step loop posts nothing ahead of such a step, so the devices are idle meanwhile.
 * Several hosts: the hook also gets gathers over every host (host-gather.ts), scoped to the epoch, through which the
 * hosts agree on the epoch's logs and on whether to stop (fit-loop.ts).
 */
import type { ResolvedConfig } from '../config-types.js';
import { peerWaitMs } from '../world/peer-wait.js';
import { hostGather } from './host-gather.js';
import { optimizerStateOf, paramSlots } from '../actors/shared-buffers.js';
import { optimizerStep } from '../optim/flat-optimizer.js';
import { stateNamesOf, type OptimizerWeights } from '../optim/optimizer-weights.js';
import type { RunCheckpointing } from './checkpointing.js';
import type { RunThreads } from './run-threads.js';
import type { LaidOut } from './run-setup.js';
import { modelOrderWeights, splitState } from './run-summary.js';
import type { TrainHooks } from './run-types.js';

/** Whether `step` ends an epoch the hooks want to hear of. */
export function epochEndDue(hooks: TrainHooks, stepsPerEpoch: number, step: number): boolean {
  return hooks.atEpochEnd !== undefined && step % stepsPerEpoch === 0;
}

/** The epoch-end's config: its epochs' length, and the hosts' world. */
export type EpochEndConfig = Pick<
  ResolvedConfig,
  'stepsPerEpoch' | 'rendezvous' | 'topology' | 'stallTimeoutMs' | 'optimizer'
>;

/** The hook called for the epoch `step` ends; true: the run ends after `step`. */
export async function atEpochEnd(
  parts: { hooks: TrainHooks; threads: RunThreads; checkpoints: RunCheckpointing },
  laidOut: LaidOut,
  cfg: EpochEndConfig,
  step: number,
): Promise<boolean> {
  const { hooks, threads, checkpoints } = parts;
  const { stepsPerEpoch } = cfg;
  if (!epochEndDue(hooks, stepsPerEpoch, step)) return false;
  await threads.applied(laidOut.groups.length, step);
  const weights = async () => {
    const state = laidOut.stateTotal > 0 ? (await checkpoints.snapshots(step))[0].state! : new Float32Array(0);
    return {
      weights: modelOrderWeights(laidOut.weights, laidOut.layout, paramSlots(laidOut.buffers)[0]),
      nonTrainableWeights: splitState(laidOut.state, state),
    };
  };
  const optimizerState = (): OptimizerWeights => {
    const names = stateNamesOf(cfg.optimizer);
    // every device holds the same state (a sharded update writes each shard into every replica)
    const slots = optimizerStateOf(laidOut.buffers, 0).map((s, j) =>
      modelOrderWeights(laidOut.weights, laidOut.layout, s).map(w => ({ ...w, name: `${w.name}/${names[j]}` })),
    );
    return { iterations: optimizerStep(cfg.optimizer, step), slots };
  };
  const hosts = hostGather(cfg, `epoch-end.${step}`, peerWaitMs(cfg.stallTimeoutMs));
  return (
    (await hooks.atEpochEnd!({
      epoch: step / stepsPerEpoch,
      step,
      weights,
      optimizerState,
      ...(hosts ? { hosts } : {}),
    })) === true
  );
}
