/** A run's trained weights (device 0's: every replica holds the same) written into the user's model, by name. */
import * as tf from '#tfjs';
import type { TrainSummary } from '../trainer/run-types.js';
import { TandemError } from '../errors.js';
import { assignWeight } from '../model/flat-weights.js';

/** The run's trainable and non-trainable weights into `model`'s variables, matched by name and shape. */
export function loadTrainedWeights(
  model: tf.LayersModel,
  run: Pick<TrainSummary, 'weights' | 'nonTrainableWeights'>,
): void {
  write(model.trainableWeights, run.weights, 'trainable');
  write(model.nonTrainableWeights, run.nonTrainableWeights, 'non-trainable');
}

function write(vars: tf.LayersModel['weights'], values: TrainSummary['weights'], what: string): void {
  if (vars.length !== values.length)
    throw new TandemError(
      'BAD_MODEL',
      `fit: the model has ${vars.length} ${what} weights and the run trained ${values.length}; was the model changed ` +
        'during fit?',
    );
  vars.forEach((v, i) => {
    const w = values[i];
    if (w.name !== v.originalName || w.shape.join() !== v.shape.join())
      throw new TandemError(
        'BAD_MODEL',
        `fit: ${what} weight ${i} of the model is ${v.originalName} [${v.shape.join(', ')}], the run's ${w.name} ` +
          `[${w.shape.join(', ')}]; was the model changed during fit?`,
      );
    const value = tf.tensor(w.values, w.shape, 'float32');
    assignWeight(v, value); // as trained: tfjs's fit applies no constraint (flat-weights.ts)
    value.dispose();
  });
}
