// fitDataset of a model of several outputs, 2 devices: a classifier head (softmax, categoricalCrossentropy) and a
// regression head (meanSquaredError) on one trunk, `metrics: ['acc']`, a generator dataset of 5 batches (8 samples,
// the last 4) whose ys are a Tensor[] (the outputs' order), then { outputName: Tensor }; validationData [x, ys]
// tensors. Against tfjs's model.fitDataset on the same dataset: the training History (relative 1e-4) and the final
// weights (1e-4); the val_ logs against tfjs's model.evaluate of the validation samples after each epoch (tfjs
// 4.22's fitDataset shifts its own val_ logs of several outputs, and its evaluate returns one spurious value first:
// the values after it are in metricsNames order); the same with validationData a dataset.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { fitDataset } from '../src/index.js';
import { values } from './fixtures/fit-case-helpers.js';

await tf.setBackend('cpu');
const N = 36;
const V = 8;
const BATCH = 8;

function make(): tf.LayersModel {
  const input = tf.input({ shape: [5] });
  const h = tf.layers.dense({ units: 6, activation: 'relu' }).apply(input) as tf.SymbolicTensor;
  const cls = tf.layers.dense({ units: 3, activation: 'softmax', name: 'cls' }).apply(h) as tf.SymbolicTensor;
  const reg = tf.layers.dense({ units: 2, name: 'reg' }).apply(h) as tf.SymbolicTensor;
  const m = tf.model({ inputs: input, outputs: [cls, reg] });
  m.compile({ optimizer: tf.train.sgd(0.1), loss: ['categoricalCrossentropy', 'meanSquaredError'], metrics: ['acc'] });
  m.setWeights(m.getWeights().map((w, i) => tf.tensor(values(w.size, i + 1), w.shape)));
  return m;
}

function tensors(n: number, seed: number) {
  const x = tf.tensor2d(values(n * 5, seed), [n, 5]);
  const labels = Array.from({ length: n }, (_, i) => Math.abs(Math.floor(values(6, i + seed)[0] * 3)) % 3);
  const cls = tf.oneHot(tf.tensor1d(labels, 'int32'), 3).toFloat();
  const reg = tf.tensor2d(values(n * 2, seed + 2), [n, 2]);
  return { x, cls, reg };
}

/** Batches of x and the targets, ys as a Tensor[] or a map, new tensors each pass. */
function dataset(asMap: boolean) {
  const { x, cls, reg } = tensors(N, 7);
  return tf.data.generator(function* () {
    for (let from = 0; from < N; from += BATCH) {
      const n = Math.min(BATCH, N - from);
      const [c, r] = [cls.slice(from, n), reg.slice(from, n)];
      yield { xs: x.slice(from, n), ys: asMap ? { cls: c, reg: r } : [c, r] };
    }
  });
}

const relative = (p: number, q: number) => Math.abs(p - q) / Math.max(Math.abs(q), 1e-6);
const KEYS = ['loss', 'cls_loss', 'reg_loss', 'cls_acc', 'reg_acc'];
const EPOCHS = 3;

async function reference() {
  const model = make();
  const v = tensors(V, 20);
  const val: number[][] = [];
  const evaluate = new tf.CustomCallback({
    onEpochEnd: async () => {
      const out = model.evaluate(v.x, [v.cls, v.reg], { batchSize: 4 }) as tf.Scalar[];
      val.push(out.slice(1).map(s => s.dataSync()[0])); // the first is spurious (tfjs 4.22)
      tf.dispose(out);
    },
  });
  const h = await model.fitDataset(dataset(false), { epochs: EPOCHS, verbose: 0, callbacks: [evaluate] });
  return { history: h.history as Record<string, number[]>, val, weights: model.getWeights().map(w => w.dataSync()) };
}

t.test('fitDataset of two outputs, ys an array or a map, 2 devices = model.fitDataset', async t => {
  const ref = await reference();
  for (const asMap of [false, true]) {
    const model = make();
    const v = tensors(V, 20);
    const ys = asMap ? { cls: v.cls, reg: v.reg } : [v.cls, v.reg];
    const h = await fitDataset(model, dataset(asMap), {
      epochs: EPOCHS,
      verbose: 0,
      validationData: [v.x, ys] as unknown as [tf.Tensor, tf.Tensor],
      validationBatchSize: 4,
      devices: 2,
      backend: 'cpu',
    });
    const got = h.history as Record<string, number[]>;
    const what = asMap ? 'ys a map' : 'ys an array';
    t.same(Object.keys(got).sort(), [...KEYS, ...KEYS.map(k => `val_${k}`)].sort(), `${what}: tfjs's keys`);
    let worst = 0;
    for (const key of KEYS) got[key].forEach((g, e) => (worst = Math.max(worst, relative(g, ref.history[key][e]))));
    t.ok(worst < 1e-4, `${what}: training History within 1e-4 (worst ${worst.toExponential(2)})`);
    let worstVal = 0;
    ref.val.forEach((row, e) =>
      KEYS.forEach((key, i) => (worstVal = Math.max(worstVal, relative(got[`val_${key}`][e], row[i])))),
    );
    t.ok(worstVal < 1e-4, `${what}: val_ logs = model.evaluate (worst ${worstVal.toExponential(2)})`);
    let far = 0;
    model
      .getWeights()
      .forEach((w, k) => w.dataSync().forEach((g, i) => (far = Math.max(far, Math.abs(g - ref.weights[k][i])))));
    t.ok(far < 1e-4, `${what}: final weights within 1e-4 (worst ${far.toExponential(2)})`);
    tf.dispose([v.x, v.cls, v.reg]);
  }
});

t.test('validationData as a dataset (ys a map, batches of 4): val_ logs = model.evaluate after each epoch', async t => {
  const ref = await reference();
  const v = tensors(V, 20);
  const validationData = tf.data.generator(function* () {
    for (let from = 0; from < V; from += 4)
      yield { xs: v.x.slice(from, 4), ys: { cls: v.cls.slice(from, 4), reg: v.reg.slice(from, 4) } };
  });
  const model = make();
  const h = await fitDataset(model, dataset(false), {
    epochs: EPOCHS,
    verbose: 0,
    validationData,
    devices: 2,
    backend: 'cpu',
  });
  const got = h.history as Record<string, number[]>;
  t.same(Object.keys(got).sort(), [...KEYS, ...KEYS.map(k => `val_${k}`)].sort(), "tfjs's keys");
  let worst = 0;
  ref.val.forEach((row, e) =>
    KEYS.forEach((key, i) => (worst = Math.max(worst, relative(got[`val_${key}`][e], row[i])))),
  );
  t.ok(worst < 1e-4, `val_ logs = model.evaluate (worst ${worst.toExponential(2)})`);
  tf.dispose([v.x, v.cls, v.reg]);
});

t.test('refusals: ys not one tensor per output, classWeight', async t => {
  const model = make();
  const { x, cls } = tensors(8, 3);
  const bad = tf.data.array([{ xs: x, ys: [cls] }]);
  await t.rejects(fitDataset(model, bad, { epochs: 1, backend: 'cpu', verbose: 0 }), {
    name: 'TandemError',
    message: /fitDataset: the model has 2 outputs/,
  });
  await t.rejects(fitDataset(model, dataset(false), { epochs: 1, backend: 'cpu', classWeight: { 0: 1 }, verbose: 0 }), {
    message: /classWeight with a model of several outputs/,
  });
  tf.dispose([x, cls]);
});
