// Weight constraints (kernelConstraint: maxNorm, nonNeg, …): tfjs 4.22's model.fit and model.evaluate never apply
// them (its optimizers update the variables themselves; only setWeights and loading project a weight), so fit and
// evaluate must not either: not when the device threads load the model, not when validation or evaluate sets the
// trained weights, not when the trained weights go back into the model. Compared with tfjs's own model.fit on a fresh
// model whose initial kernels break their constraints.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { evaluate, fit } from '../src/index.js';
import { worstRelative, worstWeightDifference } from './fixtures/fit-models.js';
import { threeClassData } from './fixtures/fit-case-helpers.js';

await tf.setBackend('cpu');

const N = 38;

/** Seeded initial kernels (the same model twice) with norms above maxNorm's 0.5 and negative values nonNeg drops. */
function make(): tf.LayersModel {
  const model = tf.sequential({
    layers: [
      tf.layers.dense({
        inputShape: [5],
        units: 6,
        activation: 'relu',
        kernelInitializer: tf.initializers.randomNormal({ stddev: 1, seed: 1 }),
        kernelConstraint: tf.constraints.maxNorm({ maxValue: 0.5 }),
      }),
      tf.layers.dense({
        units: 3,
        activation: 'softmax',
        kernelInitializer: tf.initializers.randomNormal({ stddev: 1, seed: 2 }),
        kernelConstraint: tf.constraints.nonNeg(),
      }),
    ],
  });
  model.compile({ optimizer: tf.train.sgd(0.5), loss: 'categoricalCrossentropy', metrics: ['acc'] });
  return model;
}

function data() {
  return threeClassData(N, 1);
}

const scalars = (s: tf.Scalar | tf.Scalar[]) => (Array.isArray(s) ? s : [s]).map(v => v.dataSync()[0]);

t.test('the initial kernels break their constraints (else this file tests nothing)', async t => {
  const model = make();
  const [kernel] = model.getWeights();
  const projected = tf.constraints.maxNorm({ maxValue: 0.5 }).apply(kernel);
  t.ok(tf.max(tf.abs(tf.sub(kernel, projected))).dataSync()[0] > 0.01, 'maxNorm would change the first kernel');
  tf.dispose(projected);
  model.dispose();
});

t.test('fit on 2 devices = model.fit: History with val_ logs, final weights', async t => {
  const { x, y } = data();
  const reference = make(),
    model = make();
  const args = { epochs: 3, batchSize: 8, shuffle: false, verbose: 0 as const, validationSplit: 0.25 };
  const expected = await reference.fit(x, y, args);
  const got = await fit(model, x, y, { ...args, devices: 2, backend: 'cpu' });
  t.same(Object.keys(got.history).sort(), Object.keys(expected.history).sort(), 'History keys');
  for (const key of Object.keys(expected.history)) {
    const d = worstRelative(expected.history[key] as number[], got.history[key] as number[]);
    t.ok(d <= 1e-4, `history.${key} relative difference ${d.toExponential(2)} ≤ 1e-4`);
  }
  const w = worstWeightDifference(reference, model);
  t.ok(w <= 1e-4, `final weights max |Δ| ${w.toExponential(2)} ≤ 1e-4`);
  tf.dispose([x, y]);
  [reference, model].forEach(m => m.dispose());
});

t.test('evaluate on 2 devices = model.evaluate', async t => {
  const { x, y } = data();
  const model = make();
  const expected = scalars(model.evaluate(x, y, { batchSize: 8 }) as tf.Scalar[]);
  const out = (await evaluate(model, x, y, { batchSize: 8, devices: 2, backend: 'cpu' })) as tf.Scalar[];
  const d = worstRelative(expected, scalars(out));
  t.ok(d <= 1e-4, `loss and acc relative difference ${d.toExponential(2)} ≤ 1e-4`);
  tf.dispose([x, y, ...out]);
  model.dispose();
});
