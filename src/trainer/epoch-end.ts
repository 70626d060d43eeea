/**
 * The `atEpochEnd` hook's call: after an epoch's last step, once every device applied it, the hook gets the epoch and
 * the weights on request (device 0's parameters from shared memory, its non-trainable weights from its thread), and
 * says whether the run ends there. The step loop posts nothing ahead of such a step, so the devices are idle meanwhile.
 */
import { paramSlots } from '../actors/shared-buffers.js';
import type { RunCheckpointing } from './checkpointing.js';
import type { RunThreads } from './run-threads.js';
import type { LaidOut } from './run-setup.js';
import { modelOrderWeights, splitState } from './run-summary.js';
import type { TrainHooks } from './run-types.js';

/** Whether `step` ends an epoch the hooks want to hear of. */
export function epochEndDue(hooks: TrainHooks, stepsPerEpoch: number, step: number): boolean {
  return hooks.atEpochEnd !== undefined && step % stepsPerEpoch === 0;
}

/** The hook called for the epoch `step` ends; true: the run ends after `step`. */
export async function atEpochEnd(
  parts: { hooks: TrainHooks; threads: RunThreads; checkpoints: RunCheckpointing },
  laidOut: LaidOut,
  stepsPerEpoch: number,
  step: number,
): Promise<boolean> {
  const { hooks, threads, checkpoints } = parts;
  if (!epochEndDue(hooks, stepsPerEpoch, step)) return false;
  await threads.applied(laidOut.groups.length, step);
  const weights = async () => {
    const state = laidOut.stateTotal > 0 ? (await checkpoints.snapshots(step))[0].state! : new Float32Array(0);
    return {
      weights: modelOrderWeights(laidOut.weights, laidOut.layout, paramSlots(laidOut.buffers)[0]),
      nonTrainableWeights: splitState(laidOut.state, state),
    };
  };
  return (await hooks.atEpochEnd!({ epoch: step / stepsPerEpoch, step, weights })) === true;
}
