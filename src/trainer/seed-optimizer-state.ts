/**
 * A saved model's optimizer state (config/saved-model.ts found it) in every device's optimizer slots before step 1:
 * each array at its weight's place in the flat layout, checked against the weights the devices built.
 */
import { optimizerStateOf } from '../actors/shared-buffers.js';
import { readSavedOptimizerState } from '../config/saved-model.js';
import type { ResolvedConfig } from '../config-types.js';
import type { LaidOut } from './run-setup.js';

export async function seedOptimizerState(
  cfg: Pick<ResolvedConfig, 'optimizer' | 'optimizerStateFrom'>,
  laidOut: LaidOut,
): Promise<void> {
  const saved = await readSavedOptimizerState(cfg, laidOut.weights);
  if (!saved) return;
  for (let d = 0; d < laidOut.buffers.devices; d++) {
    const slots = optimizerStateOf(laidOut.buffers, d);
    saved.state.slots.forEach((arrays, j) => {
      for (const v of laidOut.layout.variables) slots[j].set(arrays[v.modelIndex].values, v.offset);
    });
  }
}
