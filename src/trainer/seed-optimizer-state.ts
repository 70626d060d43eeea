/**
 * A saved model's optimizer state (config/saved-model.ts found it) in every device's optimizer slots before step 1:
 * each array at its weight's place in the flat layout, checked against the weights the devices built.
 */
import { optimizerStateOf } from '../actors/shared-buffers.js';
import { optimizerStateError } from '../config/saved-model.js';
import type { ResolvedConfig } from '../config-types.js';
import { readLayersModelFiles, splitOptimizerWeights } from '../model/layers-model-files.js';
import { optimizerWeightsOf, type OptimizerWeights } from '../optim/optimizer-weights.js';
import type { LaidOut } from './run-setup.js';

export async function seedOptimizerState(
  cfg: Pick<ResolvedConfig, 'optimizer' | 'optimizerStateFrom'>,
  laidOut: LaidOut,
): Promise<void> {
  const file = cfg.optimizerStateFrom;
  if (file === undefined) return;
  const list = splitOptimizerWeights(file, await readLayersModelFiles(file)).optimizer;
  let state: OptimizerWeights;
  try {
    state = optimizerWeightsOf(cfg.optimizer, laidOut.weights, list);
  } catch (err) {
    throw optimizerStateError(file, err);
  }
  for (let d = 0; d < laidOut.buffers.devices; d++) {
    const slots = optimizerStateOf(laidOut.buffers, d);
    state.slots.forEach((arrays, j) => {
      for (const v of laidOut.layout.variables) slots[j].set(arrays[v.modelIndex].values, v.offset);
    });
  }
}
