/**
 * The state after the last step every group of this host's replicas completed, rebuilt from shared memory once every
 * thread of a failed run has ended (as abort-checkpoint.ts does for a checkpoint): what an elastic run goes on from
 * when a host is lost (elastic-run.ts). Undefined when the run's state is not all in shared memory (no pre-update copy
 * was kept), or no step was completed.
 */
import type { ControlBlock } from '../pipeline/control-block.js';
import { optimizerStateOf, paramSlots, type SharedBuffers } from '../actors/shared-buffers.js';
import { StepPreimage } from '../actors/step-preimage.js';
import type { ParameterGroup } from '../model/parameter-layout.js';
import type { WeightShape } from '../actors/protocol.js';

export interface CompletedState {
  step: number;
  weights: WeightShape[];
  params: Float32Array;
  optimizerState: Float32Array[];
}

export function completedState(
  control: ControlBlock,
  laidOut: { buffers: SharedBuffers; groups: ParameterGroup[]; weights: WeightShape[] } | undefined,
  firstStep: number,
  target?: number,
): CompletedState | undefined {
  const preimage = laidOut?.buffers.preimage;
  if (!laidOut || !preimage) return undefined;
  const { buffers, groups, weights } = laidOut;
  const { phase, step: commStep } = control.phaseOf(0, 'comm');
  const rebuilt = new StepPreimage(preimage, groups.length, buffers.total, buffers.stateSlots).rebuild(
    groups,
    g => control.applied(0, g),
    phase === 'update' ? commStep : undefined,
    paramSlots(buffers)[0],
    optimizerStateOf(buffers, 0),
    target,
  );
  // firstStep - 1: the state the run started from (resumed, or step 0) is complete too
  if (!rebuilt || rebuilt.step < firstStep - 1) return undefined;
  return { ...rebuilt, weights };
}
