// The losses tfjs's compile takes by name that tandem has no loss of its own for (hinge, squaredHinge,
// categoricalHinge, kullbackLeiblerDivergence, cosineProximity) train as tfjs's own functions: tandem's fit on 2
// devices against model.fit (History relative 1e-4, final weights 1e-4), evaluate against model.evaluate, and
// fitDataset against model.fitDataset; in a model of two outputs too.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { evaluate, fit, fitDataset } from '../src/index.js';
import { values } from './fixtures/fit-case-helpers.js';
import { assertSameTraining } from './fixtures/fit-models.js';

await tf.setBackend('cpu');
const N = 48;

function classifier(loss: string, activation: string): tf.LayersModel {
  const m = tf.sequential({
    layers: [
      tf.layers.dense({ units: 8, inputShape: [6], activation: 'relu' }),
      tf.layers.dense({ units: 3, activation: activation as 'tanh' }),
    ],
  });
  m.compile({ optimizer: tf.train.sgd(0.1), loss, metrics: ['acc'] });
  m.setWeights(m.getWeights().map((w, i) => tf.tensor(values(w.size, i + 1), w.shape)));
  return m;
}

const x = tf.tensor2d(values(N * 6, 7), [N, 6]);
const oneHot = tf
  .oneHot(
    tf.tensor1d(
      Array.from({ length: N }, (_, i) => (i * 7) % 3),
      'int32',
    ),
    3,
  )
  .toFloat();
const signs = tf.sub(tf.mul(oneHot, 2), 1); // hinge losses take targets of -1 and 1
t.teardown(() => tf.dispose([x, oneHot, signs]));

const CASES: [string, string, tf.Tensor][] = [
  ['hinge', 'tanh', signs],
  ['squaredHinge', 'tanh', signs],
  ['categoricalHinge', 'softmax', oneHot],
  ['kullbackLeiblerDivergence', 'softmax', oneHot],
  ['cosineProximity', 'linear', oneHot],
];

for (const [loss, activation, y] of CASES)
  t.test(`loss '${loss}': fit and evaluate on 2 devices as model.fit and model.evaluate`, async t => {
    const [reference, model] = [classifier(loss, activation), classifier(loss, activation)];
    const args = { epochs: 2, batchSize: 8, shuffle: false };
    const expected = await reference.fit(x, y, { ...args, verbose: 0 });
    const got = await fit(model, x, y, { ...args, devices: 2, backend: 'cpu' });
    assertSameTraining(t, [expected, reference], [got, model]);
    const want = (reference.evaluate(x, y, { batchSize: 8 }) as tf.Scalar[]).map(s => s.dataSync()[0]);
    const seen = ((await evaluate(model, x, y, { batchSize: 8, backend: 'cpu' })) as tf.Scalar[]).map(
      s => s.dataSync()[0],
    );
    t.ok(
      seen.every((v, i) => Math.abs(v - want[i]) <= 1e-5 * Math.max(1, Math.abs(want[i]))),
      `evaluate ${seen.join(', ')} against ${want.join(', ')}`,
    );
  });

t.test("loss 'hinge' on fitDataset, and beside another loss in a model of two outputs", async t => {
  const dataset = () => tf.data.zip({ xs: tf.data.array(x.unstack()), ys: tf.data.array(signs.unstack()) }).batch(8);
  const [reference, model] = [classifier('hinge', 'tanh'), classifier('hinge', 'tanh')];
  const expected = await reference.fitDataset(dataset(), { epochs: 2, verbose: 0 });
  const got = await fitDataset(model, dataset(), { epochs: 2, devices: 2, backend: 'cpu' });
  assertSameTraining(t, [expected, reference], [got, model], { what: 'fitDataset: ' });

  const two = () => {
    const input = tf.input({ shape: [6] });
    const h = tf.layers.dense({ units: 8, activation: 'relu' }).apply(input) as tf.SymbolicTensor;
    const cls = tf.layers.dense({ units: 3, activation: 'softmax', name: 'cls' }).apply(h) as tf.SymbolicTensor;
    const sign = tf.layers.dense({ units: 3, activation: 'tanh', name: 'sign' }).apply(h) as tf.SymbolicTensor;
    const m = tf.model({ inputs: input, outputs: [cls, sign] });
    m.compile({ optimizer: tf.train.sgd(0.1), loss: ['categoricalCrossentropy', 'squaredHinge'] });
    m.setWeights(m.getWeights().map((w, i) => tf.tensor(values(w.size, i + 11), w.shape)));
    return m;
  };
  const [ref2, model2] = [two(), two()];
  const args = { epochs: 2, batchSize: 8, shuffle: false };
  const want = await ref2.fit(x, [oneHot, signs], { ...args, verbose: 0 });
  const seen = await fit(model2, x, [oneHot, signs], { ...args, devices: 2, backend: 'cpu' });
  assertSameTraining(t, [want, ref2], [seen, model2], { what: 'two outputs: ' });
});
