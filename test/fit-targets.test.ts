// Targets of a shape (a Dataset's targetShape, fit's y of any shape) and metrics: what is refused, and how. That they
// train as model.fit trains them is fit-conformance.test.ts's (the autoencoder, seq2seq, multi-label, regression of
// several floats and per-step class ids cases). Each refusal here comes before any thread starts.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { evaluate, fit, fitDataset, train } from '../src/index.js';
import { FIT_CASES } from './fixtures/fit-models.js';
import { MULTI_INPUT_CASES } from './fixtures/fit-models-more.js';
import { osThreads } from './fixtures/os-threads.js';

await tf.setBackend('cpu');
const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-fit-targets-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** A data module of 24 samples of 4 values whose targets are [2, 3]; `extra` replaces or adds fields. */
function targetModule(name: string, extra: string): string {
  const file = path.join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    'export default () => ({ size: 24, sampleShape: [4], classes: 1, targetShape: [2, 3], ' +
      'read(i, out, o) { out.fill(i / 24, o, o + 4); return 0; }, ' +
      `readTarget(i, out, o) { out.fill(1, o, o + 6); }, ${extra} });`,
  );
  return file;
}

const caseNamed = (start: string) => FIT_CASES.find(c => c.name.startsWith(start))!;

t.test('fit: classWeight with a target tensor per sample is refused, naming the shape and the way out', async t => {
  const c = caseNamed('multi-label');
  const { x, y } = c.data();
  await t.rejects(fit(c.make(), x, y, { classWeight: { 0: 1, 1: 2 }, backend: 'cpu' }), {
    code: 'BAD_CONFIG',
    message:
      /classWeight weighs one class label per sample, and y goes to the devices as targets of shape \[4\].*leave classWeight out, or give one label per sample/,
  });
  tf.dispose([x, y]);
});

t.test('fit: classWeight on labels that a metric sends as targets is refused, naming the metric', async t => {
  const make = (loss: string, metrics: string[]) => {
    const model = tf.sequential({ layers: [tf.layers.dense({ inputShape: [2], units: 3, activation: 'softmax' })] });
    model.compile({ optimizer: 'sgd', loss, metrics });
    return model;
  };
  const x = tf.zeros([6, 2]);
  const ids = tf.tensor1d([0, 1, 2, 0, 1, 2]);
  const oneHot = tf.oneHot(tf.tensor1d([0, 1, 2, 0, 1, 2], 'int32'), 3);
  const classWeight = { 0: 1, 1: 2, 2: 3 };
  for (const [loss, y, metrics, shape] of [
    ['sparseCategoricalCrossentropy', ids, ['acc', 'ce'], '1'],
    ['categoricalCrossentropy', oneHot, ['mse'], '3'],
  ] as const)
    await t.rejects(fit(make(loss, [...metrics]), x, y, { classWeight, backend: 'cpu' }), {
      code: 'BAD_CONFIG',
      message: new RegExp(
        `targets of shape \\[${shape}\\].*because metrics ${metrics.map(m => `'${m}'`).join(', ')} are computed ` +
          `on y.*compile with metrics \\['acc'\\] \\(or none\\) to weigh classes, or leave classWeight out`,
      ),
    });
  tf.dispose([x, ids, oneHot]);
});

t.test('categoricalCrossentropy with class ids: refused by fit, fitDataset and evaluate as by tfjs', async t => {
  const make = () => {
    const model = tf.sequential({ layers: [tf.layers.dense({ inputShape: [2], units: 3, activation: 'softmax' })] });
    model.compile({ optimizer: 'sgd', loss: 'categoricalCrossentropy', metrics: ['acc'] });
    return model;
  };
  const x = tf.randomNormal([6, 2]);
  const wanted =
    /y of shape \[6(, 1)?\] for loss 'categoricalCrossentropy'.*one-hot.*'sparseCategoricalCrossentropy'.*tf\.oneHot\(ids, 3\)/;
  for (const y of [tf.tensor1d([0, 1, 2, 0, 1, 2]), tf.tensor2d([0, 1, 2, 0, 1, 2], [6, 1])]) {
    await t.rejects(make().fit(x, y, { epochs: 1, batchSize: 2, verbose: 0 }), /target expected/, `tfjs: [${y.shape}]`);
    await t.rejects(fit(make(), x, y, { batchSize: 2, backend: 'cpu' }), { code: 'BAD_DATA', message: wanted });
    // evaluate runs tfjs's own model.evaluate on each device, which refuses them with tfjs's message
    await t.rejects(evaluate(make(), x, y, { batchSize: 2, backend: 'cpu' }), /target expected a batch/);
    const ds = tf.data.zip({ xs: tf.data.array(x.unstack()), ys: tf.data.array(y.unstack()) }).batch(6);
    await t.rejects(fitDataset(make(), ds, { epochs: 1, backend: 'cpu' }), { code: 'BAD_DATA', message: /'sparseCat/ });
    tf.dispose(y);
  }
  const oneHot = tf.oneHot(tf.tensor1d([0, 1, 2, 0, 1, 2], 'int32'), 3);
  const history = await fit(make(), x, oneHot, { batchSize: 2, backend: 'cpu' });
  t.equal(history.history.loss.length, 1, 'the same model trains on one-hot rows');
  tf.dispose([x, oneHot]);
});

t.test(
  "a model of several outputs: a y not of its output's shape is refused before any thread, as by tfjs",
  async t => {
    const make = (loss: string | ((a: tf.Tensor, b: tf.Tensor) => tf.Tensor)) => {
      const input = tf.input({ shape: [6] });
      const h = tf.layers.dense({ units: 8, activation: 'relu' }).apply(input) as tf.SymbolicTensor;
      const cls = tf.layers.dense({ units: 3, activation: 'softmax', name: 'cls' }).apply(h) as tf.SymbolicTensor;
      const reg = tf.layers.dense({ units: 2, name: 'reg' }).apply(h) as tf.SymbolicTensor;
      const model = tf.model({ inputs: input, outputs: [cls, reg] });
      model.compile({ optimizer: 'sgd', loss: ['categoricalCrossentropy', loss] as never });
      return model;
    };
    const x = tf.randomNormal([12, 6]);
    const ids = tf.tensor1d(Array.from({ length: 12 }, (_, i) => i % 3));
    const oneHot = tf.oneHot(tf.cast(ids, 'int32'), 3);
    const [wide, flat, fine] = [tf.randomNormal([12, 3]), tf.randomNormal([12]), tf.randomNormal([12, 2])];
    const mse = (a: tf.Tensor, b: tf.Tensor) => tf.metrics.meanSquaredError(a, b);
    const cases: [string, string | typeof mse, tf.Tensor[], RegExp][] = [
      [
        '3 floats for 2',
        'meanSquaredError',
        [oneHot, wide],
        /y of output reg has shape \[12, 3\] .*output's shape \[2\]/,
      ],
      ['1 float for 2', 'meanSquaredError', [oneHot, flat], /y of output reg has shape \[12\] .*output's shape \[2\]/],
      ['a function loss', mse, [oneHot, wide], /y of output reg has shape \[12, 3\] for loss a function/],
      ['class ids', 'meanSquaredError', [ids, fine], /y of output cls has shape \[12\] .*one-hot rows.*tf\.oneHot/],
    ];
    for (const [what, loss, y, message] of cases) {
      await t.rejects(
        make(loss).fit(x, y, { epochs: 1, batchSize: 4, verbose: 0 }),
        /target expected/,
        `tfjs: ${what}`,
      );
      const threads = osThreads();
      await t.rejects(fit(make(loss), x, y, { batchSize: 4, backend: 'cpu' }), { code: 'BAD_DATA', message }, what);
      t.equal(osThreads(), threads, `${what}: no thread started`);
      // evaluate and fitDataset refuse it as well, each in its own name
      // (fitDataset names a batch's shape: 4 samples, not 12)
      const named = (who: string, n = '12') => new RegExp(`^${who}: ${message.source.replace('\\[12', `\\[${n}`)}`);
      const opts = { batchSize: 4, backend: 'cpu' as const };
      await t.rejects(evaluate(make(loss), x, y, opts), { code: 'BAD_DATA', message: named('evaluate') }, what);
      const byName = { cls: tf.data.array(y[0].unstack()), reg: tf.data.array(y[1].unstack()) };
      const ds = tf.data.zip({ xs: tf.data.array(x.unstack()), ys: tf.data.zip(byName) });
      await t.rejects(fitDataset(make(loss), ds.batch(4), { epochs: 1, backend: 'cpu' }), {
        code: 'BAD_DATA',
        message: named('fitDataset', '4'),
      });
    }
    tf.dispose([x, ids, oneHot, wide, flat, fine]);
  },
);

t.test("fit: class ids not of the output's shape are refused, naming both shapes", async t => {
  const c = caseNamed('sequence of class ids');
  const { x, y } = c.data();
  const wrong = tf.zeros([48, 4, 1]);
  await t.rejects(fit(c.make(), x, wrong, { backend: 'cpu' }), {
    code: 'BAD_DATA',
    message: /y of shape \[48, 4, 1\] for loss 'sparseCategoricalCrossentropy'.*output shape \[5\] \(class ids\)/,
  });
  const notIds = tf.fill([48, 5, 1], 0.5);
  await t.rejects(fit(c.make(), x, notIds, { backend: 'cpu' }), { code: 'BAD_DATA', message: /integer class ids/ });
  tf.dispose([x, y, wrong, notIds]);
});

t.test('a data module with a targetShape: its mistakes named before any thread', async t => {
  const run = { batch: 8, steps: 1, devices: 2, backend: 'cpu' as const };
  await t.rejects(train({ ...run, data: targetModule('no-read-target', 'readTarget: undefined') }), {
    code: 'BAD_DATA',
    message: /readTarget: expected a function readTarget\(index, out, offset\)/,
  });
  await t.rejects(train({ ...run, data: targetModule('bad-shape', "targetShape: [2, 'x']") }), {
    code: 'BAD_DATA',
    message: /targetShape: expected a list of positive integers/,
  });
  const nan = targetModule('nan-target', 'readTarget(i, out, o) { out.fill(1, o, o + 5); }');
  await t.rejects(train({ ...run, data: nan }), {
    code: 'BAD_DATA',
    message: /sample 0's target has NaN at element 5: readTarget must write all 6 values of targetShape \[2, 3\]/,
  });
  await t.rejects(train({ ...run, model: 'mlp', data: targetModule('good', '') }), {
    code: 'BAD_CONFIG',
    message: /targets of shape \[2, 3\]; builtin 'mlp' is a classifier/,
  });
});

t.test('fit: a metric tandem cannot compute across devices is refused, naming it and the way out', async t => {
  const c = caseNamed('regression of 3 floats');
  const { x, y } = c.data();
  const own = c.make();
  const weight = 3; // read from around the function: not rebuilt on a device (user-functions.ts)
  const mine = (a: tf.Tensor, b: tf.Tensor) => tf.mul(tf.metrics.meanSquaredError(a, b), weight);
  own.compile({ optimizer: 'sgd', loss: 'meanAbsoluteError', metrics: ['mse', mine] });
  await t.rejects(fit(own, x, y, { backend: 'cpu' }), {
    code: 'BAD_CONFIG',
    message: /metric 'mine' \(function mine\) cannot run on the device threads: rebuilt, it throws: weight is not/,
  });
  const r2 = c.make();
  r2.compile({ optimizer: 'sgd', loss: 'meanAbsoluteError', metrics: [tf.metrics.r2Score] });
  await t.rejects(fit(r2, x, y, { backend: 'cpu' }), { code: 'BAD_CONFIG', message: /function r2Score/ });
  tf.dispose([x, y]);
});

t.test('fit: metrics as a list per output (tfjs compiles them to no function) refused, saying how', async t => {
  const input = tf.input({ shape: [2] });
  const cls = tf.layers.dense({ units: 3, activation: 'softmax', name: 'cls' }).apply(input) as tf.SymbolicTensor;
  const reg = tf.layers.dense({ units: 1, name: 'reg' }).apply(input) as tf.SymbolicTensor;
  const two = tf.model({ inputs: input, outputs: [cls, reg] });
  const lists = [['acc'], ['mse']] as unknown as string[]; // compile's type forbids it; tfjs takes it all the same
  two.compile({ optimizer: 'sgd', loss: ['categoricalCrossentropy', 'meanSquaredError'], metrics: lists });
  const one = tf.sequential({ layers: [tf.layers.dense({ inputShape: [2], units: 3, activation: 'softmax' })] });
  one.compile({ optimizer: 'sgd', loss: 'categoricalCrossentropy', metrics: [['acc']] as unknown as string[] });
  const [x, y, r] = [tf.zeros([4, 2]), tf.zeros([4, 3]), tf.zeros([4, 1])];
  await t.rejects(two.fit(x, [y, r]), /metric is not a function/, "tfjs's own model.fit fails on it");
  const way = /is no function: .*give metrics as \{ outputName: \['acc'\] \}, or one list for every output/;
  await t.rejects(fit(two, x, [y, r], { backend: 'cpu' }), { code: 'BAD_CONFIG', message: way });
  await t.rejects(fit(one, x, y, { backend: 'cpu' }), { code: 'BAD_CONFIG', message: way });
  tf.dispose([x, y, r]);
  [two, one].forEach(m => m.dispose());
});

t.test('metrics: a train option of tfjs function names, on targets of a shape only', async t => {
  const run = { batch: 8, steps: 1, devices: 2, backend: 'cpu' as const };
  await t.rejects(train({ ...run, metrics: ['r2Score'] }), {
    code: 'BAD_CONFIG',
    message: /config\.metrics: expected/,
  });
  await t.rejects(train({ ...run, metrics: ['meanSquaredError'] }), {
    code: 'BAD_CONFIG',
    message: /config\.metrics: are computed on targets of a shape/,
  });
});

t.test('a custom layer without the plugin that registers it: the class and the plugins option named', async t => {
  const c = caseNamed('custom layer');
  const { x, y } = c.data();
  await t.rejects(fit(c.make(), x, y, { devices: 1, backend: 'cpu', verbose: 0 }), {
    message: /class TandemTestScale, which is not registered on this thread.*in the plugins option/,
  });
  tf.dispose([x, y]);
});

t.test('fit: x of a model of two inputs, given wrong, is refused naming the inputs', async t => {
  const c = MULTI_INPUT_CASES[0];
  const { x, y } = c.data();
  await t.rejects(fit(c.make(), [x[0]], y, { backend: 'cpu' }), {
    code: 'BAD_DATA',
    message: /x gives 1 tensor\(s\) and the model has 2 input\(s\) \(features, grid\)/,
  });
  await t.rejects(fit(c.make(), { features: x[0] }, y, { backend: 'cpu' }), {
    code: 'BAD_DATA',
    message: /x has no tensor for input 'grid'/,
  });
  // one tensor: named as fit's x, with the inputs and the two ways to give them (not fitDataset's or evaluate's rule)
  const oneTensor =
    /^fit: x is one tensor, and the model has 2 inputs \(features, grid\); give one tensor per input: an array in that order \(\[features, grid\]\) or an object by name \(\{ features, grid \}\)$/;
  await t.rejects(fit(c.make(), x[0], y, { backend: 'cpu' }), { code: 'BAD_DATA', message: oneTensor });
  await t.rejects(fit(c.make(), x, y, { backend: 'cpu', validationData: [x[0], y] }), {
    code: 'BAD_DATA',
    message: /^fit: validationData is one tensor, and the model has 2 inputs \(features, grid\)/,
  });
  await t.rejects(evaluate(c.make(), x[0], y, { backend: 'cpu' }), {
    code: 'BAD_DATA',
    message: /^evaluate: x is one tensor, and the model has 2 inputs \(features, grid\)/,
  });
  tf.dispose([...x, y]);
});

t.test(
  'fitDataset names itself where it refuses a model: not compiled, a logits output for a loss of probabilities',
  async t => {
    const x = tf.randomNormal([8, 6]);
    const y = tf.oneHot(tf.tensor1d([0, 1, 2, 0, 1, 2, 0, 1], 'int32'), 3);
    const ds = tf.data.zip({ xs: tf.data.array(x.unstack()), ys: tf.data.array(y.unstack()) }).batch(4);
    const dense = (activation: 'softmax' | 'linear') =>
      tf.sequential({ layers: [tf.layers.dense({ units: 3, inputShape: [6], activation })] });
    await t.rejects(fitDataset(dense('softmax'), ds, { epochs: 1, backend: 'cpu' }), {
      code: 'BAD_MODEL',
      message: /^fitDataset: the model is not compiled; call model\.compile/,
    });
    const logits = dense('linear');
    logits.compile({ optimizer: 'sgd', loss: 'categoricalCrossentropy' });
    await t.rejects(fitDataset(logits, ds, { epochs: 1, backend: 'cpu' }), {
      code: 'BAD_MODEL',
      message:
        /^fitDataset: loss 'categoricalCrossentropy' takes probabilities, and the model's output ends in 'linear'/,
    });
    await t.rejects(fit(logits, x, y, { backend: 'cpu' }), { code: 'BAD_MODEL', message: /^fit: loss 'categorical/ });
    tf.dispose([x, y]);
  },
);

t.test("a y of the wrong form for two outputs: refused in the caller's name, naming the argument", async t => {
  const input = tf.input({ shape: [6] });
  const cls = tf.layers.dense({ units: 3, activation: 'softmax', name: 'cls' }).apply(input) as tf.SymbolicTensor;
  const reg = tf.layers.dense({ units: 2, name: 'reg' }).apply(input) as tf.SymbolicTensor;
  const make = () => {
    const model = tf.model({ inputs: input, outputs: [cls, reg] });
    model.compile({ optimizer: 'sgd', loss: ['categoricalCrossentropy', 'meanSquaredError'] });
    return model;
  };
  const x = tf.randomNormal([8, 6]);
  const y = [tf.oneHot(tf.tensor1d([0, 1, 2, 0, 1, 2, 0, 1], 'int32'), 3), tf.randomNormal([8, 2])];
  const opts = { batchSize: 4, backend: 'cpu' as const };
  const two = (who: string, what: string) =>
    new RegExp(`^${who}: the model has 2 outputs \\(cls, reg\\); give ${what} as a Tensor\\[\\] of 2 in that order`);
  const extra = (what: string) => new RegExp(`\\(${what} names score, not an output\\)$`);
  const wrongName = { cls: y[0], reg: y[1], score: y[1] };
  await t.rejects(fit(make(), x, y[0], opts), { code: 'BAD_DATA', message: two('fit', 'y') });
  await t.rejects(fit(make(), x, y, { ...opts, validationData: [x, y[0]] }), {
    code: 'BAD_DATA',
    message: two('fit', "validationData's y"),
  });
  await t.rejects(fit(make(), x, y, { ...opts, validationData: [x, wrongName] as never }), {
    code: 'BAD_DATA',
    message: extra("validationData's y"),
  });
  await t.rejects(evaluate(make(), x, wrongName as never, opts), { code: 'BAD_DATA', message: extra('y') });
  await t.rejects(evaluate(make(), x, y[0], opts), { code: 'BAD_DATA', message: two('evaluate', 'y') });
  const batches = tf.data.zip({ xs: tf.data.array(x.unstack()), ys: tf.data.array(y[0].unstack()) }).batch(4);
  await t.rejects(fitDataset(make(), batches, { epochs: 1, backend: 'cpu' }), {
    code: 'BAD_DATA',
    message: two('fitDataset', "a batch's ys"),
  });
  const byName = tf.data.zip({ cls: tf.data.array(y[0].unstack()), reg: tf.data.array(y[1].unstack()) });
  const good = tf.data.zip({ xs: tf.data.array(x.unstack()), ys: byName }).batch(4);
  await t.rejects(fitDataset(make(), good, { epochs: 1, backend: 'cpu', validationData: [x, y[0]] }), {
    code: 'BAD_DATA',
    message: two('fitDataset', "validationData's y"),
  });
  await t.rejects(fitDataset(make(), good, { epochs: 1, backend: 'cpu', validationData: batches }), {
    code: 'BAD_DATA',
    message: two('fitDataset', "validationData's ys"),
  });
  tf.dispose([x, ...y]);
});

t.test("a model tandem cannot train: refused in the caller's name, before any thread, not as a file", async t => {
  const dense = (units: number, activation?: 'softmax') => tf.layers.dense({ units, activation });
  const models: [string, () => tf.LayersModel, number[], RegExp][] = [
    [
      'stateful LSTM',
      () =>
        tf.sequential({
          layers: [tf.layers.lstm({ batchInputShape: [4, 5, 2], units: 3, stateful: true }), dense(3, 'softmax')],
        }),
      [5, 2],
      /layer '\w+' \(LSTM\) is stateful .*Build it with stateful: false\.$/,
    ],
    [
      'ThresholdedReLU after a Dense',
      () =>
        tf.sequential({
          layers: [tf.layers.dense({ inputShape: [6], units: 4 }), tf.layers.thresholdedReLU(), dense(3, 'softmax')],
        }),
      [6],
      /layer '\w+' \(ThresholdedReLU\) runs the kernel Greater, which has no gradient in TensorFlow\.js.*trainable: false/,
    ],
  ];
  for (const [what, make, sample, cause] of models) {
    const x = tf.zeros([8, ...sample]);
    const y = tf.oneHot(tf.tensor1d([0, 1, 2, 0, 1, 2, 0, 1], 'int32'), 3);
    const compiled = () => {
      const model = make();
      model.compile({ optimizer: 'sgd', loss: 'categoricalCrossentropy' });
      return model;
    };
    const threads = osThreads();
    const ds = tf.data.zip({ xs: tf.data.array(x.unstack()), ys: tf.data.array(y.unstack()) }).batch(4);
    for (const [who, run] of [
      ['fit', () => fit(compiled(), x, y, { batchSize: 4, backend: 'cpu' })],
      ['fitDataset', () => fitDataset(compiled(), ds, { epochs: 1, backend: 'cpu' })],
    ] as const) {
      const e = (await run().then(
        () => undefined,
        (err: unknown) => err,
      )) as Error & { code?: string };
      t.equal(e?.code, 'BAD_CONFIG', `${who}, ${what}: BAD_CONFIG`);
      t.match(e?.message, new RegExp(`^${who}: the model cannot be trained: ${cause.source}`), `${who}, ${what}`);
      t.notMatch(e?.message, /tandem-fit-|model\.json/, `${who}, ${what}: no private file named`);
    }
    t.equal(osThreads(), threads, `${what}: no thread started`);
    tf.dispose([x, y]);
  }
});
