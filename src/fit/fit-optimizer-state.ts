/**
 * `fit` keeps the model's optimizer between calls, as tfjs's `model.fit` does (Adam's moments and iterations go on):
 * the state goes into fit's private model.json as `model.save({ includeOptimizer: true })` writes it (weights of group
 * 'optimizer'), the run's optimizer starts from it (config/saved-model.ts), and at the run's last epoch end the
 * devices' state goes back into `model.optimizer` (its `setWeights`; tfjs's Adamax, which has none, through
 * tfjs-optimizer-state.ts).
 */
import * as tf from '#tfjs';
import { TandemError } from '../errors.js';
import { OptimizerWeightsProblem, type OptimizerWeights } from '../optim/optimizer-weights.js';
import type { FitCaller } from './fit-caller.js';
import { setTfjsOptimizerState, tfjsOptimizerState, type NamedTensor } from '../optim/tfjs-optimizer-state.js';

/** Weights of group 'optimizer' to append to a saved model: their manifest entries and bytes. */
export interface OptimizerStateFiles {
  specs: tf.io.WeightsManifestEntry[];
  data: ArrayBuffer;
}

/**
 * The state of `model`'s optimizer, to write beside `model` (the model the run trains), checked against its trainable
 * weights; undefined: nothing to carry (a fresh optimizer, or one that cannot give its state).
 */
export async function optimizerStateFiles(
  model: tf.LayersModel,
  who: Exclude<FitCaller, 'evaluate'>,
): Promise<OptimizerStateFiles | undefined> {
  const list = await tfjsOptimizerState(model.optimizer);
  if (!list || list.length === 0) return undefined;
  try {
    if (list.length === 1 && list[0].tensor.dataSync()[0] === 0) return undefined;
    checkAgainstWeights(list.slice(1), model.trainableWeights, who);
    return await tf.io.encodeWeights(list, 'optimizer');
  } finally {
    list[0].tensor.dispose(); // a scalar made for us; the rest are the optimizer's own variables
  }
}

/** One array of state per trainable weight for each slot, in the weights' order and shapes, or BAD_MODEL. */
function checkAgainstWeights(state: NamedTensor[], weights: tf.LayersModel['weights'], who: FitCaller): void {
  const n = weights.length;
  const fits =
    n > 0
      ? state.length % n === 0 && state.every((s, k) => s.tensor.shape.join() === weights[k % n].shape.join())
      : state.length === 0;
  if (fits) return;
  const first = state[0] && `, the first ${state[0].name} [${state[0].tensor.shape.join(', ')}]`;
  throw new TandemError(
    'BAD_MODEL',
    `${who}: the model's optimizer holds ${state.length} state arrays${first ?? ''}, which do not match the ` +
      `model's ${n} trainable weights, one array per weight for each of its slots (was a layer's trainable changed ` +
      'after compile?); call model.compile again to start the optimizer afresh',
  );
}

/**
 * The devices' optimizer state (the run's last epoch end) into `model.optimizer`, each array named after the model's
 * weight as tfjs names it; the optimizer's old state variables disposed. An optimizer whose tfjs class cannot take
 * its state, or that does not say how tfjs names its slots, is left as it was.
 */
export async function takeOptimizerState(model: tf.LayersModel, state: () => OptimizerWeights): Promise<void> {
  let got: OptimizerWeights;
  try {
    got = state();
  } catch (err) {
    if (err instanceof OptimizerWeightsProblem) return; // a plugin's optimizer: no names for tfjs
    throw err;
  }
  const old = await tfjsOptimizerState(model.optimizer);
  if (!old) return;
  const weights = model.trainableWeights;
  const list: NamedTensor[] = [
    { name: 'iter', tensor: tf.scalar(got.iterations, 'int32') },
    ...got.slots.flatMap(arrays =>
      arrays.map((a, i) => ({
        name: `${weights[i].name}/${a.name.slice(weights[i].originalName.length + 1)}`,
        tensor: tf.tensor(a.values, a.shape, 'float32'),
      })),
    ),
  ];
  try {
    await setTfjsOptimizerState(model.optimizer, list);
    tf.dispose(old.slice(1).map(n => n.tensor)); // replaced: the optimizer holds new variables now
  } finally {
    tf.dispose([old[0].tensor, ...list.map(n => n.tensor)]); // getWeights' scalar, and the tensors given
  }
}
