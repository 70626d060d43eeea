/**
 * One fit of a model at a time, as tfjs's `model.fit` and `model.fitDataset` have it: they refuse to start while the
 * model's `isTraining` is set ("Cannot start training because another fit() call is ongoing"), and so does tandem's
 * fit, which sets the same flag for its run. A second fit of the same model would otherwise train on weights the
 * first is writing back between its epochs, and each would end with the other's.
 */
import type * as tf from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import type { FitCaller } from './fit-caller.js';

/** tfjs's flag: on the model, and on a Sequential's inner model (whose `fit` Sequential's calls). */
type Flagged = { isTraining?: boolean };

function flagHolders(model: tf.LayersModel): Flagged[] {
  const inner = (model as unknown as { model?: unknown }).model;
  const holders = [model as unknown as Flagged];
  if (inner !== null && typeof inner === 'object' && inner !== model && 'isTraining' in inner)
    holders.push(inner as Flagged);
  return holders;
}

/** `run()` as `model`'s only fit: refused (BAD_CONFIG) while another of tandem's or tfjs's is ongoing. */
export async function asOnlyFit<T>(model: tf.LayersModel, who: FitCaller, run: () => Promise<T>): Promise<T> {
  const holders = flagHolders(model);
  if (holders.some(h => h.isTraining === true))
    throw new TandemError(
      'BAD_CONFIG',
      `${who}: another fit of this model is ongoing (tandem's or tfjs's): await it before starting the next, as ` +
        'tfjs\'s model.fit requires ("Cannot start training because another fit() call is ongoing")',
    );
  for (const h of holders) h.isTraining = true;
  try {
    return await run();
  } finally {
    for (const h of holders) h.isTraining = false;
  }
}
