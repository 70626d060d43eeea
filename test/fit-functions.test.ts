// Losses and metrics given to compile as functions, on tandem's fit, evaluate and fitDataset against tfjs's own
// model.fit, model.evaluate and model.fitDataset (one engine, the cpu backend, shuffle off): the History (relative
// 1e-4) and the final weights (1e-4), on 1 and 2 devices. Cases: an arrow loss of per-sample values; a function
// expression; an object's method; tfjs's own tf.losses.meanSquaredError (trained as the named loss); a metric of the
// user's function beside 'acc'; classWeight on a function loss; two outputs, one with a function loss and a function
// metric; fitDataset. A function that reads a variable from around it, a bound one, and one over the batch's samples
// together (a device's share of the batch would give another value) are refused before any thread starts, naming
// the function and why (user-functions.ts rebuilds each function from its source).
import t, { type Test } from 'tap';
import * as tf from '@tensorflow/tfjs';
import { evaluate, fit, fitDataset } from '../src/index.js';
import { values } from './fixtures/fit-case-helpers.js';

await tf.setBackend('cpu');
const N = 48;
type LossFn = (y: tf.Tensor, p: tf.Tensor) => tf.Tensor;
type Compile = { loss: string | LossFn | (string | LossFn)[]; metrics?: unknown };

function classifier(c: Compile): tf.LayersModel {
  const m = tf.sequential({
    layers: [
      tf.layers.dense({ units: 8, inputShape: [6], activation: 'relu' }),
      tf.layers.dense({ units: 3, activation: 'softmax' }),
    ],
  });
  m.compile({ optimizer: tf.train.sgd(0.1), ...c } as tf.ModelCompileArgs);
  m.setWeights(m.getWeights().map((w, i) => tf.tensor(values(w.size, i + 1), w.shape)));
  return m;
}

function data() {
  const x = tf.tensor2d(values(N * 6, 7), [N, 6]);
  const labels = Array.from({ length: N }, (_, i) => Math.abs(Math.floor(values(6, i)[0] * 3)) % 3);
  return { x, y: tf.oneHot(tf.tensor1d(labels, 'int32'), 3).toFloat() };
}

const relative = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-6);

function sameHistory(t: Test, got: Record<string, number[]>, want: Record<string, number[]>, label: string) {
  t.same(Object.keys(got).sort(), Object.keys(want).sort(), `${label}: History keys`);
  for (const key of Object.keys(want))
    want[key].forEach((v, e) =>
      t.ok(relative(got[key]?.[e] ?? NaN, v) < 1e-4, `${label}: ${key}[${e}] ${got[key]?.[e]} ≈ ${v}`),
    );
}

function sameWeights(t: Test, a: tf.LayersModel, b: tf.LayersModel, label: string) {
  const worst = Math.max(...a.getWeights().map((w, i) => tf.max(tf.abs(tf.sub(w, b.getWeights()[i]))).dataSync()[0]));
  t.ok(worst < 1e-4, `${label}: weights within 1e-4 of model.fit's (worst ${worst})`);
}

const args = { epochs: 2, batchSize: 12, shuffle: false, verbose: 0 as const, validationSplit: 0.25 };

const CASES: { name: string; compile: Compile; extra?: Record<string, unknown> }[] = [
  { name: 'an arrow loss', compile: { loss: (y, p) => tf.mean(tf.square(tf.sub(y, p)), -1) } },
  {
    name: 'a function expression',
    compile: {
      loss: function crossEntropy(y: tf.Tensor, p: tf.Tensor) {
        return tf.neg(tf.sum(tf.mul(y, tf.log(tf.add(p, 1e-7))), -1));
      },
    },
  },
  {
    name: "an object's method",
    compile: { loss: { hinge: (y: tf.Tensor, p: tf.Tensor) => tf.losses.hingeLoss(y, p) }.hinge },
  },
  {
    name: 'a method shorthand',
    compile: {
      loss: {
        twice(y: tf.Tensor, p: tf.Tensor) {
          return tf.mul(tf.metrics.categoricalCrossentropy(y, p), 2);
        },
      }.twice,
    },
  },
  { name: "tfjs's tf.losses.meanSquaredError", compile: { loss: tf.losses.meanSquaredError as LossFn } },
  {
    name: "a metric function beside 'acc'",
    compile: {
      loss: 'categoricalCrossentropy',
      metrics: [
        'acc',
        function margin(y: tf.Tensor, p: tf.Tensor) {
          return tf.sum(tf.mul(y, p), -1);
        },
      ],
    },
  },
  {
    name: 'classWeight on a function loss',
    compile: { loss: (y, p) => tf.metrics.categoricalCrossentropy(y, p), metrics: ['acc'] },
    extra: { classWeight: { 0: 1, 1: 2, 2: 0.5 } },
  },
];

for (const c of CASES)
  t.test(`${c.name}: fit and evaluate = model.fit and model.evaluate`, async t => {
    const { x, y } = data();
    const reference = classifier(c.compile);
    const want = (await reference.fit(x, y, { ...args, ...c.extra })).history as Record<string, number[]>;
    const evaluated = [reference.evaluate(x, y, { batchSize: 12 })].flat().map(s => s.dataSync()[0]);
    for (const devices of [1, 2]) {
      const model = classifier(c.compile);
      const h = await fit(model, x, y, { ...args, ...c.extra, devices, backend: 'cpu' });
      sameHistory(t, h.history as Record<string, number[]>, want, `${devices} device(s)`);
      sameWeights(t, model, reference, `${devices} device(s)`);
      const got = [await evaluate(model, x, y, { batchSize: 12, devices, backend: 'cpu' })].flat();
      got.forEach((s, i) =>
        t.ok(relative(s.dataSync()[0], evaluated[i]) < 1e-4, `evaluate[${i}] on ${devices}: ${s.dataSync()[0]}`),
      );
    }
  });

function twoOutputs(): tf.LayersModel {
  const input = tf.input({ shape: [6] });
  const h = tf.layers.dense({ units: 8, activation: 'relu' }).apply(input) as tf.SymbolicTensor;
  const cls = tf.layers.dense({ units: 3, activation: 'softmax', name: 'cls' }).apply(h) as tf.SymbolicTensor;
  const reg = tf.layers.dense({ units: 1, name: 'reg' }).apply(h) as tf.SymbolicTensor;
  const m = tf.model({ inputs: input, outputs: [cls, reg] });
  const absolute = (y: tf.Tensor, p: tf.Tensor) => tf.mean(tf.abs(tf.sub(y, p)), -1);
  const half = function half(y: tf.Tensor, p: tf.Tensor) {
    return tf.mul(tf.mean(tf.abs(tf.sub(y, p)), -1), 0.5);
  };
  m.compile({
    optimizer: tf.train.sgd(0.1),
    loss: ['categoricalCrossentropy', absolute],
    metrics: { reg: [half] },
  } as unknown as tf.ModelCompileArgs);
  m.setWeights(m.getWeights().map((w, i) => tf.tensor(values(w.size, i + 3), w.shape)));
  return m;
}

t.test('two outputs, one with a function loss and a function metric: fit = model.fit', async t => {
  const { x, y } = data();
  const r = tf.sum(x, 1, true);
  const reference = twoOutputs();
  const train = { ...args, validationSplit: 0 }; // tfjs 4.22 shifts its own val_ logs of several outputs
  const want = (await reference.fit(x, [y, r], train)).history as Record<string, number[]>;
  t.same(Object.keys(want).sort(), ['cls_loss', 'loss', 'reg_half', 'reg_loss']);
  const model = twoOutputs();
  const h = await fit(model, x, { cls: y, reg: r }, { ...train, devices: 2, backend: 'cpu' });
  sameHistory(t, h.history as Record<string, number[]>, want, '2 devices');
  sameWeights(t, model, reference, '2 devices');
});

t.test('fitDataset with a function loss and a function metric = model.fitDataset', async t => {
  const { x, y } = data();
  const compile: Compile = {
    loss: (y, p) => tf.metrics.categoricalCrossentropy(y, p),
    metrics: [(y: tf.Tensor, p: tf.Tensor) => tf.metrics.categoricalAccuracy(y, p)],
  };
  const dataset = () => tf.data.zip({ xs: tf.data.array(tf.unstack(x)), ys: tf.data.array(tf.unstack(y)) }).batch(12);
  const reference = classifier(compile);
  const want = (await reference.fitDataset(dataset(), { epochs: 2, verbose: 0 })).history as Record<string, number[]>;
  const model = classifier(compile);
  const h = await fitDataset(model, dataset(), { epochs: 2, devices: 2, backend: 'cpu' });
  sameHistory(t, h.history as Record<string, number[]>, want, '2 devices');
  sameWeights(t, model, reference, '2 devices');
});

t.test('a function that cannot be rebuilt on a device is refused, naming why', async t => {
  const { x, y } = data();
  const scale = 2;
  const closure = (y: tf.Tensor, p: tf.Tensor) => tf.mul(tf.metrics.meanSquaredError(y, p), scale);
  const bound = function (this: unknown, y: tf.Tensor, p: tf.Tensor) {
    return tf.metrics.meanSquaredError(y, p);
  }.bind(null);
  const spread = function spread(y: tf.Tensor, p: tf.Tensor) {
    return tf.sub(tf.max(p), tf.min(p)); // over the batch: a device's share has another
  };
  const refusals: [string, Compile, RegExp][] = [
    ['a metric over the batch', { loss: 'meanSquaredError', metrics: [spread] }, /metric 'spread'.*samples together/],
    ['a loss reading a variable around it', { loss: closure }, /loss of output .*rebuilt, it throws: scale is not/],
    ['a bound loss', { loss: bound }, /function bound .*built in or bound, so its source is hidden/],
    [
      'a metric reading a variable',
      { loss: 'meanSquaredError', metrics: [closure] },
      /metric 'closure'.*scale is not defined/,
    ],
  ];
  for (const [label, compile, message] of refusals) {
    await t.rejects(
      fit(classifier(compile), x, y, { ...args, devices: 2, backend: 'cpu' }),
      { code: 'BAD_CONFIG', message },
      label,
    );
  }
});
