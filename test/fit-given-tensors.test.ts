// The caller's tensors stay the caller's: fit, evaluate and fitDataset take a model of one input's x (and
// validationData's x) as a Tensor[] of one, as tfjs does, train on it as model.fit does, and dispose none of them;
// fit and evaluate take a model of one output's y (and validationData's y) as [y] or { outputName: y }, as tfjs does;
// fitDataset takes a one-input, one-output model's batches with xs a Tensor[] of one and ys { outputName: Tensor }.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { evaluate, fit, fitDataset } from '../src/index.js';
import { twin, worstRelative } from './fixtures/fit-models.js';
import { tensorsBesidesOptimizer, threeClassData } from './fixtures/fit-case-helpers.js';

await tf.setBackend('cpu');

const N = 24;

function make(): tf.LayersModel {
  const model = tf.sequential({
    layers: [tf.layers.dense({ inputShape: [5], units: 3, activation: 'softmax', name: 'probs' })],
  });
  model.compile({ optimizer: 'sgd', loss: 'categoricalCrossentropy', metrics: ['acc'] });
  return model;
}

function data() {
  const { x, y } = threeClassData(N, 7);
  return { x, y, vx: x.slice(0, 8), vy: y.slice(0, 8) };
}

const on = { devices: 2, backend: 'cpu' } as const;

t.test('fit: x and validationData x as [x] = model.fit, the tensors still alive', async t => {
  const { x, y, vx, vy } = data();
  const start = make();
  const reference = twin(start, make);
  const args = { epochs: 2, batchSize: 8, shuffle: false, verbose: 0 as const, validationData: [[vx], vy] };
  const expected = await reference.fit([x], y, args as tf.ModelFitArgs);
  t.notOk(x.isDisposed || vx.isDisposed, 'model.fit disposes neither');
  const model = twin(start, make);
  const got = await fit(model, [x], y, { ...args, ...on } as never);
  t.notOk(x.isDisposed, 'fit leaves x alive');
  t.notOk(vx.isDisposed, "fit leaves validationData's x alive");
  for (const key of Object.keys(expected.history)) {
    const d = worstRelative(expected.history[key] as number[], got.history[key] as number[]);
    t.ok(d <= 1e-4, `history.${key} relative difference ${d.toExponential(2)} ≤ 1e-4`);
  }
  tf.dispose([x, y, vx, vy]);
  [start, reference, model].forEach(m => m.dispose());
});

t.test('fit and evaluate: y (and validationData y) as [y] and { outputName: y } = model.fit', async t => {
  const { x, y, vx, vy } = data();
  const start = make();
  for (const [form, wrap] of [
    ['[y]', (v: tf.Tensor) => [v]],
    ['{ probs: y }', (v: tf.Tensor) => ({ probs: v })],
  ] as const) {
    const reference = twin(start, make);
    const args = { epochs: 2, batchSize: 8, shuffle: false, verbose: 0 as const, validationData: [vx, wrap(vy)] };
    const expected = await reference.fit(x, wrap(y), args as tf.ModelFitArgs);
    const model = twin(start, make);
    const got = await fit(model, x, wrap(y), { ...args, ...on } as never);
    t.same(Object.keys(got.history).sort(), Object.keys(expected.history).sort(), `${form}: History keys, val_ too`);
    for (const key of Object.keys(expected.history)) {
      const d = worstRelative(expected.history[key] as number[], got.history[key] as number[]);
      t.ok(d <= 1e-4, `${form}: history.${key} relative difference ${d.toExponential(2)} ≤ 1e-4`);
    }
    const want = (reference.evaluate(x, wrap(y) as never, { batchSize: 8 }) as tf.Scalar[]).map(v => v.dataSync()[0]);
    const values = (await evaluate(model, x, wrap(y), { batchSize: 8, ...on })) as tf.Scalar[];
    const d = worstRelative(
      want,
      values.map(v => v.dataSync()[0]),
    );
    t.ok(d <= 1e-4, `${form}: evaluate's loss and acc relative difference ${d.toExponential(2)} ≤ 1e-4`);
    tf.dispose(values);
    [reference, model].forEach(m => m.dispose());
  }
  await t.rejects(fit(start, x, [y, y], on), {
    code: 'BAD_DATA',
    message: /fit: the model has one output \(probs\); give y as a Tensor, \[Tensor\] or \{ probs: Tensor \}/,
  });
  await t.rejects(fit(start, x, { scores: y }, on), { code: 'BAD_DATA', message: /y names scores, not an output/ });
  tf.dispose([x, y, vx, vy]);
  start.dispose();
});

t.test('evaluate: x as [x] = model.evaluate, x still alive', async t => {
  const { x, y, vx, vy } = data();
  const model = make();
  const expected = (model.evaluate([x], y, { batchSize: 8 }) as tf.Scalar[]).map(s => s.dataSync()[0]);
  const got = (await evaluate(model, [x], y, { batchSize: 8, ...on })) as tf.Scalar[];
  t.notOk(x.isDisposed, 'evaluate leaves x alive');
  const d = worstRelative(
    expected,
    got.map(s => s.dataSync()[0]),
  );
  t.ok(d <= 1e-4, `loss and acc relative difference ${d.toExponential(2)} ≤ 1e-4`);
  tf.dispose([x, y, vx, vy, ...got]);
  model.dispose();
});

t.test("fitDataset: validationData's x as [x] = model.fitDataset, x still alive", async t => {
  const { x, y, vx, vy } = data();
  const [xs, ys] = [tf.unstack(x), tf.unstack(y)];
  const dataset = tf.data.zip({ xs: tf.data.array(xs), ys: tf.data.array(ys) }).batch(8);
  const start = make();
  const reference = twin(start, make);
  const args = { epochs: 2, verbose: 0 as const, validationData: [[vx], vy] as [tf.Tensor[], tf.Tensor] };
  const expected = await reference.fitDataset(dataset, args);
  const model = twin(start, make);
  const got = await fitDataset(model, dataset, { ...args, ...on } as never);
  t.notOk(vx.isDisposed, "fitDataset leaves validationData's x alive");
  for (const key of Object.keys(expected.history)) {
    const d = worstRelative(expected.history[key] as number[], got.history[key] as number[]);
    t.ok(d <= 1e-4, `history.${key} relative difference ${d.toExponential(2)} ≤ 1e-4`);
  }
  tf.dispose([x, y, vx, vy, ...xs, ...ys]);
  [start, reference, model].forEach(m => m.dispose());
});

t.test('fitDataset: batches of xs [x] and ys { outputName: y } = model.fitDataset', async t => {
  const { x, y, vx, vy } = data();
  const [xs, ys] = [tf.unstack(x), tf.unstack(y)];
  const start = make();
  const name = start.outputNames[0];
  const dataset = tf.data
    .zip({ xs: tf.data.array(xs), ys: tf.data.array(ys) })
    .batch(8)
    .map(b => {
      const { xs, ys } = b as { xs: tf.Tensor; ys: tf.Tensor };
      return { xs: [xs], ys: { [name]: ys } } as unknown as tf.TensorContainer;
    });
  const reference = twin(start, make);
  const expected = await reference.fitDataset(dataset, { epochs: 2, verbose: 0 });
  const model = twin(start, make);
  const got = await fitDataset(model, dataset, { epochs: 2, verbose: 0, ...on });
  t.same(Object.keys(got.history).sort(), Object.keys(expected.history).sort(), 'History keys');
  for (const key of Object.keys(expected.history)) {
    const d = worstRelative(expected.history[key] as number[], got.history[key] as number[]);
    t.ok(d <= 1e-4, `history.${key} relative difference ${d.toExponential(2)} ≤ 1e-4`);
  }
  tf.dispose([x, y, vx, vy, ...xs, ...ys]);
  [start, reference, model].forEach(m => m.dispose());
});

t.test('fit: a NaN or Infinity in the samples it trains is refused, naming the tensor, sample and element', async t => {
  const { x, y } = data();
  const at = (tensor: tf.Tensor, sample: number, element: number, value: number) => {
    const values = tensor.arraySync() as number[][];
    values[sample][element] = value;
    return tf.tensor2d(values);
  };
  const bad: [string, tf.Tensor, tf.Tensor, RegExp][] = [
    ['x', at(x, 3, 2, NaN), y, /^fit: x has NaN at sample 3, element 2; clean or impute the data before training/],
    ['y', x, at(y, 5, 1, Infinity), /^fit: y has Infinity at sample 5, element 1; clean or impute/],
  ];
  for (const [what, bx, by, message] of bad) {
    await t.rejects(fit(make(), bx, by, { batchSize: 4, ...on }), { code: 'BAD_DATA', message }, what);
    await t.rejects(
      fit(make(), [bx], [by], { batchSize: 4, ...on }),
      { code: 'BAD_DATA', message },
      `${what} as [${what}]`,
    );
  }
  // one of two inputs, named
  const a = tf.input({ shape: [2], name: 'left' });
  const b = tf.input({ shape: [3], name: 'right' });
  const out = tf.layers.dense({ units: 3, activation: 'softmax' }).apply(tf.layers.concatenate().apply([a, b]));
  const two = tf.model({ inputs: [a, b], outputs: out as tf.SymbolicTensor });
  two.compile({ optimizer: 'sgd', loss: 'categoricalCrossentropy' });
  await t.rejects(fit(two, [x.slice([0, 0], [-1, 2]), at(x.slice([0, 2], [-1, 3]), 7, 0, -Infinity)], y, on), {
    code: 'BAD_DATA',
    message: /^fit: x's input right has -Infinity at sample 7, element 0/,
  });
  // in the validation split only: trained, as model.fit trains it (its val_loss NaN)
  const late = at(x, N - 1, 0, NaN);
  const history = await fit(make(), late, y, { batchSize: 4, validationSplit: 0.25, ...on });
  t.ok(Number.isFinite(history.history.loss[0] as number), 'the training samples are all finite: trained');
  const tfjs = await make().fit(late, y, { batchSize: 4, validationSplit: 0.25, verbose: 0 });
  t.ok(Number.isNaN(tfjs.history.val_loss[0] as number), "model.fit's val_loss: NaN");
  t.ok(Number.isNaN(history.history.val_loss[0] as number), 'val_loss NaN, as model.fit gives it');
  tf.dispose([x, y, bad[0][1], bad[1][2], late]);
});

t.test('fit: x of rank 1 for an input of one value = model.fit, as tfjs takes it; nothing left behind', async t => {
  const make1 = () => {
    const model = tf.sequential({
      layers: [tf.layers.dense({ inputShape: [1], units: 3, activation: 'softmax', kernelInitializer: 'ones' })],
    });
    model.compile({ optimizer: 'sgd', loss: 'categoricalCrossentropy' });
    return model;
  };
  const x = tf.tensor1d([1, 2, 3, 4, 5, 6, 7, 8].map(v => v / 8));
  const y = tf.oneHot(tf.tensor1d([0, 1, 2, 0, 1, 2, 0, 1], 'int32'), 3);
  const [vx, vy] = [x.slice(0, 4), y.slice(0, 4)];
  for (const [what, extra] of [
    ['validationData of rank 1', { validationData: [vx, vy] as [tf.Tensor, tf.Tensor] }],
    ['validationSplit', { validationSplit: 0.25 }],
  ] as const) {
    const args = { batchSize: 4, shuffle: false, ...extra };
    const want = await make1().fit(x, y, { ...args, verbose: 0 });
    const model = make1();
    const before = await tensorsBesidesOptimizer(model);
    const got = await fit(model, x, y, { ...args, ...on });
    t.equal(await tensorsBesidesOptimizer(model), before, `${what}: fit leaves no tensor behind`);
    for (const key of Object.keys(want.history))
      t.ok(worstRelative(want.history[key] as number[], got.history[key] as number[]) < 1e-6, `${what}: ${key}`);
  }
  t.notOk(x.isDisposed || vx.isDisposed, "the caller's tensors still alive");
  tf.dispose([x, y, vx, vy]);
});

t.test('fit and evaluate: x of the wrong sample shape or of strings, or nothing to train: refused by name', async t => {
  const { x, y } = data();
  const cases: [string, () => Promise<unknown>, RegExp][] = [
    [
      'fit, x [24, 4]',
      () => fit(make(), x.slice([0, 0], [-1, 4]), y, on),
      /^fit: x has shape \[24, 4\]: samples of \[4\], and the model's input \w+ takes samples of \[5\]$/,
    ],
    [
      'evaluate, x [24, 5, 1]',
      () => evaluate(make(), x.expandDims(2), y, on),
      /^evaluate: x has shape \[24, 5, 1\]: samples of \[5, 1\], and the model's input \w+ takes samples of \[5\]$/,
    ],
    [
      'fit, validationData x [8, 4]',
      () => fit(make(), x, y, { ...on, validationData: [[x.slice([0, 0], [8, 4])], y.slice(0, 8)] }),
      /^fit: validationData has shape \[8, 4\]: samples of \[4\]/,
    ],
    ['fit, x of strings', () => fit(make(), tf.fill([24, 5], 'a'), y, on), /^fit: x is a tensor of string; the model/],
    ['fit, no samples', () => fit(make(), tf.zeros([0, 5]), tf.zeros([0, 3]), on), /^fit: x has no samples; give/],
    [
      'fit, a split that leaves none',
      () => fit(make(), x, y, { ...on, validationSplit: 0.99 }),
      /^fit: validationSplit 0\.99 leaves none of x's 24 samples to train on/,
    ],
  ];
  for (const [what, run, message] of cases) await t.rejects(run(), { code: 'BAD_DATA', message }, what);
  tf.dispose([x, y]);
});
