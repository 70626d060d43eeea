/**
 * The checkpoint of an aborted run: once every thread has ended, the state
 * after the last step every group of device 0 completed, rebuilt from shared
 * memory — the live parameters and optimizer state, and for groups whose
 * update of the abandoned step was already (or partly) applied, the copy the
 * comm thread made before it (step-preimage.ts). Only for runs whose whole
 * state is in shared memory.
 */
import type { ResolvedConfig } from '../config-types.js';
import type { ControlBlock } from '../pipeline/control-block.js';
import { optimizerStateOf, paramSlots, type SharedBuffers } from '../actors/shared-buffers.js';
import { StepPreimage } from '../actors/step-preimage.js';
import type { WeightShape } from '../actors/protocol.js';
import type { ParameterGroup } from '../model/parameter-layout.js';
import { checkpointPath } from '../checkpoint/checkpoint-file.js';
import type { CheckpointStore } from '../checkpoint/checkpoint-store.js';
import { runFingerprint } from './run-checkpoints.js';

export interface AbortCheckpointInputs {
  cfg: ResolvedConfig;
  store: CheckpointStore;
  control: ControlBlock;
  /** Where the run's state is, once laid out. */
  laidOut?: { buffers: SharedBuffers; groups: ParameterGroup[]; weights: WeightShape[] };
  firstStep: number;
  lastCheckpoint?: string;
  /** What of the run's state lives on the device threads, if anything (then no checkpoint can be rebuilt). */
  stateOnThreads?: string;
}

export type AbortCheckpoint =
  | { kind: 'written'; step: number; path: string }
  | { kind: 'already'; step: number; path: string }
  | { kind: 'none'; reason: string };

export async function writeAbortCheckpoint(x: AbortCheckpointInputs): Promise<AbortCheckpoint> {
  if (x.stateOnThreads) return { kind: 'none', reason: `this run's ${x.stateOnThreads} live on the device threads` };
  const preimage = x.laidOut?.buffers.preimage;
  if (!x.laidOut || !preimage) return { kind: 'none', reason: 'training had not started' };
  const { buffers, groups, weights } = x.laidOut;
  const { phase, step: commStep } = x.control.phaseOf(0, 'comm');
  const rebuilt = new StepPreimage(preimage, groups.length, buffers.total, buffers.stateSlots).rebuild(
    groups,
    g => x.control.applied(0, g),
    phase === 'update' ? commStep : undefined,
    paramSlots(buffers)[0],
    optimizerStateOf(buffers, 0),
  );
  if (!rebuilt || rebuilt.step < x.firstStep) return { kind: 'none', reason: 'no step was completed' };
  const { step } = rebuilt;
  if (x.lastCheckpoint === checkpointPath(x.store.dir, step)) return { kind: 'already', step, path: x.lastCheckpoint };
  const path = await x.store.write({
    step,
    weights,
    fingerprint: runFingerprint(x.cfg),
    params: rebuilt.params,
    optimizerState: rebuilt.optimizerState,
  });
  return { kind: 'written', step, path };
}
