// fitDataset of a model of several inputs: two inputs (a [4] vector and a [2, 3] matrix) joined into a softmax
// classifier, `metrics: ['acc']`, a generator dataset of 5 batches (8 samples, the last 4) whose xs are a Tensor[]
// (the inputs' order), then { inputName: Tensor }; validationData [[xa, xb], y] tensors. Against tfjs's own
// model.fitDataset on the same dataset (tfjs takes several inputs natively): History (loss, acc, val_loss, val_acc;
// relative 1e-4) and final weights (1e-4), on 1 and 2 devices. Then two inputs and two outputs (xs and ys both
// lists) against model.fitDataset's training logs and weights; the refusals name the input.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { fitDataset } from '../src/index.js';
import { values } from './fixtures/fit-case-helpers.js';

await tf.setBackend('cpu');
const N = 36;
const V = 8;
const BATCH = 8;
const EPOCHS = 3;

function make(twoOutputs = false): tf.LayersModel {
  const a = tf.input({ shape: [4], name: 'a' });
  const b = tf.input({ shape: [2, 3], name: 'b' });
  const fb = tf.layers.flatten().apply(b) as tf.SymbolicTensor;
  const joined = tf.layers.concatenate().apply([a, fb]) as tf.SymbolicTensor;
  const h = tf.layers.dense({ units: 6, activation: 'relu' }).apply(joined) as tf.SymbolicTensor;
  const cls = tf.layers.dense({ units: 3, activation: 'softmax', name: 'cls' }).apply(h) as tf.SymbolicTensor;
  const reg = tf.layers.dense({ units: 2, name: 'reg' }).apply(h) as tf.SymbolicTensor;
  const m = tf.model({ inputs: [a, b], outputs: twoOutputs ? [cls, reg] : cls });
  m.compile({
    optimizer: tf.train.sgd(0.1),
    loss: twoOutputs ? ['categoricalCrossentropy', 'meanSquaredError'] : 'categoricalCrossentropy',
    metrics: ['acc'],
  });
  m.setWeights(m.getWeights().map((w, i) => tf.tensor(values(w.size, i + 1), w.shape)));
  return m;
}

function tensors(n: number, seed: number) {
  const a = tf.tensor2d(values(n * 4, seed), [n, 4]);
  const b = tf.tensor3d(values(n * 6, seed + 1), [n, 2, 3]);
  const labels = Array.from({ length: n }, (_, i) => Math.abs(Math.floor(values(6, i + seed)[0] * 3)) % 3);
  const cls = tf.oneHot(tf.tensor1d(labels, 'int32'), 3).toFloat();
  const reg = tf.tensor2d(values(n * 2, seed + 2), [n, 2]);
  return { a, b, cls, reg };
}

/** Batches: xs a Tensor[] or a map; ys the class targets, or [cls, reg]; new tensors each pass. */
function dataset(asMap: boolean, twoOutputs = false) {
  const { a, b, cls, reg } = tensors(N, 7);
  return tf.data.generator(function* () {
    for (let from = 0; from < N; from += BATCH) {
      const n = Math.min(BATCH, N - from);
      const [xa, xb] = [a.slice(from, n), b.slice(from, n)];
      const c = cls.slice(from, n);
      yield { xs: asMap ? { a: xa, b: xb } : [xa, xb], ys: twoOutputs ? [c, reg.slice(from, n)] : c };
    }
  });
}

const relative = (p: number, q: number) => Math.abs(p - q) / Math.max(Math.abs(q), 1e-6);

function worstWeight(model: tf.LayersModel, want: Float32Array[]): number {
  let far = 0;
  model.getWeights().forEach((w, k) => w.dataSync().forEach((g, i) => (far = Math.max(far, Math.abs(g - want[k][i])))));
  return far;
}

t.test('fitDataset of two inputs, xs an array or a map, 1 and 2 devices = model.fitDataset', async t => {
  const reference = make();
  const v = tensors(V, 20);
  const refHistory = (
    await reference.fitDataset(dataset(false), {
      epochs: EPOCHS,
      verbose: 0,
      validationData: [[v.a, v.b], v.cls] as unknown as [tf.Tensor, tf.Tensor],
      validationBatchSize: 4,
    })
  ).history as Record<string, number[]>;
  const refWeights = reference.getWeights().map(w => w.dataSync() as Float32Array);
  const keys = ['loss', 'acc', 'val_loss', 'val_acc'];
  t.same(Object.keys(refHistory).sort(), [...keys].sort(), "tfjs's own keys");
  for (const [devices, asMap] of [
    [1, false],
    [2, false],
    [2, true],
  ] as const) {
    const model = make();
    const x = asMap ? { a: v.a, b: v.b } : [v.a, v.b];
    const h = await fitDataset(model, dataset(asMap), {
      epochs: EPOCHS,
      verbose: 0,
      validationData: [x, v.cls] as unknown as [tf.Tensor, tf.Tensor],
      validationBatchSize: 4,
      devices,
      backend: 'cpu',
    });
    const got = h.history as Record<string, number[]>;
    const what = `${devices} device(s), xs ${asMap ? 'a map' : 'an array'}`;
    t.same(Object.keys(got).sort(), [...keys].sort(), `${what}: the same keys`);
    let worst = 0;
    for (const key of keys) got[key].forEach((g, e) => (worst = Math.max(worst, relative(g, refHistory[key][e]))));
    t.ok(worst < 1e-4, `${what}: History within 1e-4 (worst ${worst.toExponential(2)})`);
    const far = worstWeight(model, refWeights);
    t.ok(far < 1e-4, `${what}: final weights within 1e-4 (worst ${far.toExponential(2)})`);
  }
  tf.dispose(Object.values(v));
});

t.test('two inputs and two outputs: training logs and weights = model.fitDataset', async t => {
  const reference = make(true);
  const refHistory = (await reference.fitDataset(dataset(false, true), { epochs: EPOCHS, verbose: 0 }))
    .history as Record<string, number[]>;
  const refWeights = reference.getWeights().map(w => w.dataSync() as Float32Array);
  const model = make(true);
  const h = await fitDataset(model, dataset(true, true), { epochs: EPOCHS, verbose: 0, devices: 2, backend: 'cpu' });
  const got = h.history as Record<string, number[]>;
  t.same(Object.keys(got).sort(), Object.keys(refHistory).sort(), "tfjs's keys");
  let worst = 0;
  for (const key of Object.keys(refHistory))
    got[key].forEach((g, e) => (worst = Math.max(worst, relative(g, refHistory[key][e]))));
  t.ok(worst < 1e-4, `History within 1e-4 (worst ${worst.toExponential(2)})`);
  const far = worstWeight(model, refWeights);
  t.ok(far < 1e-4, `final weights within 1e-4 (worst ${far.toExponential(2)})`);
});

t.test('refusals: xs missing an input, xs one tensor', async t => {
  const model = make();
  const { a, b, cls } = tensors(8, 3);
  const missing = tf.data.array([{ xs: { a }, ys: cls }] as unknown as tf.TensorContainer[]);
  await t.rejects(fitDataset(model, missing, { epochs: 1, backend: 'cpu', verbose: 0 }), {
    name: 'TandemError',
    message: /has no tensor for input 'b'/,
  });
  const one = tf.data.array([{ xs: a, ys: cls }]);
  await t.rejects(fitDataset(model, one, { epochs: 1, backend: 'cpu', verbose: 0 }), {
    code: 'BAD_DATA',
    message: /is one tensor, and the model has 2 inputs \(a, b\)/,
  });
  tf.dispose([a, b, cls]);
});
