// A model of several inputs AND several outputs on tandem's fit, 2 devices: inputs a [4] and b [3] concatenated into
// one trunk, a classifier head (softmax, categoricalCrossentropy) and a regression head (meanSquaredError),
// `metrics: ['acc']`, validationSplit 0.25, shuffle off; x and y as maps, then as arrays. Against tfjs's model.fit:
// the training History (relative 1e-4), the final weights (1e-4), and the val_ logs against tfjs's model.evaluate of
// the validation samples after each epoch (tfjs 4.22's model.fit shifts its own val_ logs of several outputs, and its
// evaluate returns one spurious value first: the values after it are in metricsNames order).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { fit } from '../src/index.js';
import { values } from './fixtures/fit-case-helpers.js';

await tf.setBackend('cpu');
const N = 40;
const VALIDATION = 10;

function make(): tf.LayersModel {
  const a = tf.input({ shape: [4], name: 'a' });
  const b = tf.input({ shape: [3], name: 'b' });
  const joined = tf.layers.concatenate().apply([a, b]) as tf.SymbolicTensor;
  const h = tf.layers.dense({ units: 6, activation: 'relu' }).apply(joined) as tf.SymbolicTensor;
  const cls = tf.layers.dense({ units: 3, activation: 'softmax', name: 'cls' }).apply(h) as tf.SymbolicTensor;
  const reg = tf.layers.dense({ units: 2, name: 'reg' }).apply(h) as tf.SymbolicTensor;
  const m = tf.model({ inputs: [a, b], outputs: [cls, reg] });
  m.compile({ optimizer: tf.train.sgd(0.1), loss: ['categoricalCrossentropy', 'meanSquaredError'], metrics: ['acc'] });
  m.setWeights(m.getWeights().map((w, i) => tf.tensor(values(w.size, i + 1), w.shape)));
  return m;
}

function data() {
  const a = tf.tensor2d(values(N * 4, 7), [N, 4]);
  const b = tf.tensor2d(values(N * 3, 8), [N, 3]);
  const labels = Array.from({ length: N }, (_, i) => Math.abs(Math.floor(values(6, i)[0] * 3)) % 3);
  const cls = tf.oneHot(tf.tensor1d(labels, 'int32'), 3).toFloat();
  const reg = tf.tensor2d(values(N * 2, 9), [N, 2]);
  return { a, b, cls, reg };
}

const args = { epochs: 3, batchSize: 8, shuffle: false, verbose: 0 as const, validationSplit: 0.25 };
const relative = (p: number, q: number) => Math.abs(p - q) / Math.max(Math.abs(q), 1e-6);
const KEYS = ['loss', 'cls_loss', 'reg_loss', 'cls_acc', 'reg_acc'];

async function reference() {
  const { a, b, cls, reg } = data();
  const model = make();
  const val: number[][] = [];
  const held = [a, b, cls, reg].map(x => x.slice(N - VALIDATION, VALIDATION));
  const evaluate = new tf.CustomCallback({
    onEpochEnd: async () => {
      const out = model.evaluate(held.slice(0, 2), held.slice(2), { batchSize: 8 }) as tf.Scalar[];
      val.push(out.slice(1).map(s => s.dataSync()[0])); // the first is spurious (tfjs 4.22)
      tf.dispose(out);
    },
  });
  const h = await model.fit([a, b], [cls, reg], { ...args, callbacks: [evaluate] });
  const weights = model.getWeights().map(w => w.dataSync());
  tf.dispose([a, b, cls, reg, ...held]);
  model.dispose();
  return { history: h.history as Record<string, number[]>, val, weights };
}

t.test('two inputs, two outputs, 2 devices: fit = model.fit', async t => {
  const ref = await reference();
  for (const asMaps of [true, false]) {
    const { a, b, cls, reg } = data();
    const model = make();
    const [x, y] = asMaps
      ? [
          { a, b },
          { cls, reg },
        ]
      : [
          [a, b],
          [cls, reg],
        ];
    const h = await fit(model, x, y, { ...args, devices: 2, backend: 'cpu' });
    const got = h.history as Record<string, number[]>;
    const what = asMaps ? 'maps' : 'arrays';
    t.same(Object.keys(got).sort(), [...KEYS, ...KEYS.map(k => `val_${k}`)].sort(), `${what}: tfjs's keys`);
    let worst = 0;
    for (const key of KEYS) got[key].forEach((v, e) => (worst = Math.max(worst, relative(v, ref.history[key][e]))));
    t.ok(worst < 1e-4, `${what}: training History within 1e-4 (worst ${worst.toExponential(2)})`);
    let worstVal = 0;
    ref.val.forEach((row, e) =>
      KEYS.forEach((key, i) => (worstVal = Math.max(worstVal, relative(got[`val_${key}`][e], row[i])))),
    );
    t.ok(worstVal < 1e-4, `${what}: val_ logs = model.evaluate (worst ${worstVal.toExponential(2)})`);
    let far = 0;
    model
      .getWeights()
      .forEach((w, k) => w.dataSync().forEach((v, i) => (far = Math.max(far, Math.abs(v - ref.weights[k][i])))));
    t.ok(far < 1e-4, `${what}: final weights within 1e-4 (worst ${far.toExponential(2)})`);
    tf.dispose([a, b, cls, reg]);
    model.dispose();
  }
});
