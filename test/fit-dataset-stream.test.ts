// fitDataset streams a tf.data.Dataset: the same History and weights as tfjs's model.fitDataset when one iterator
// runs over the epochs (batchesPerEpoch), and for a generator of unknown length read through a ring one batch deep.
// Elements of one sample each are refused naming dataset.batch; a dataset that throws mid-epoch fails the fit with
// its own error (the test's process then ends: no thread left running).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { fitDataset } from '../src/index.js';
import { COUNTING_NOTE } from '../src/data/dataset-stream.js';
import { FIT_CASES, twin, worstRelative, worstWeightDifference } from './fixtures/fit-models.js';

await tf.setBackend('cpu');
const dense = FIT_CASES[0];
type Batches = tf.data.Dataset<{ xs: tf.Tensor; ys: tf.Tensor }>;

/** Rows [0, rows) of x and y in batches of `batch`, as a dataset of arrays (its length known). */
function arrayBatches(x: tf.Tensor, y: tf.Tensor, rows: number, batch: number): Batches {
  const of = (v: tf.Tensor) => tf.data.array(v.slice(0, rows).unstack());
  return tf.data.zip({ xs: of(x), ys: of(y) }).batch(batch) as unknown as Batches;
}

/** The same batches from a generator (length unknown to tfjs); `failAt`: the batch at which it throws. */
function generated(x: tf.Tensor, y: tf.Tensor, rows: number, batch: number, failAt?: number): Batches {
  return tf.data.generator(function* () {
    for (let b = 0; b * batch < rows; b++) {
      if (b === failAt) throw new Error(`generator broke at batch ${b}`);
      const n = Math.min(batch, rows - b * batch);
      yield { xs: x.slice(b * batch, n), ys: y.slice(b * batch, n) };
    }
  }) as unknown as Batches;
}

interface Checks {
  same(a: unknown, b: unknown, m: string): unknown;
  ok(v: boolean, m: string): unknown;
}

function compare(t: Checks, expected: tf.History, got: tf.History, a: tf.LayersModel, b: tf.LayersModel) {
  t.same(got.epoch, expected.epoch, 'History.epoch');
  for (const key of Object.keys(expected.history)) {
    const d = worstRelative(expected.history[key] as number[], got.history[key] as number[]);
    t.ok(d <= 1e-4, `history.${key}: relative difference ${d.toExponential(2)} ≤ 1e-4`);
  }
  const w = worstWeightDifference(a, b);
  t.ok(w <= 1e-4, `final weights: max |Δ| ${w.toExponential(2)} ≤ 1e-4`);
}

t.test(
  'batchesPerEpoch: one iterator over the epochs (5 batches, 2 an epoch, 3 epochs) as model.fitDataset',
  async t => {
    const { x, y } = dense.data();
    const reference = dense.make();
    const model = twin(reference, dense.make);
    const args = { epochs: 3, batchesPerEpoch: 2, verbose: 0 as const };
    const data = () => arrayBatches(x, y, 40, 8).repeat();
    const expected = await reference.fitDataset(data(), args);
    const got = await fitDataset(model, data(), { ...args, devices: 2, backend: 'cpu' });
    compare(t, expected, got, reference, model);
    tf.dispose([x, y]);
    reference.dispose();
    model.dispose();
  },
);

t.test('a generator of unknown length, read ahead 1 batch deep, trains as model.fitDataset', async t => {
  const { x, y } = dense.data();
  const reference = dense.make();
  const model = twin(reference, dense.make);
  const expected = await reference.fitDataset(generated(x, y, 44, 8), { epochs: 2, verbose: 0 });
  const got = await fitDataset(model, generated(x, y, 44, 8), {
    epochs: 2,
    verbose: 0,
    readAhead: 1,
    devices: 2,
    backend: 'cpu',
  });
  compare(t, expected, got, reference, model);
  tf.dispose([x, y]);
  reference.dispose();
  model.dispose();
});

t.test('refused: samples instead of batches, a batch larger than the first, batchesPerEpoch past the end', async t => {
  const { x, y } = dense.data();
  const samples = tf.data.zip({ xs: tf.data.array(x.unstack()), ys: tf.data.array(y.unstack()) });
  await t.rejects(fitDataset(dense.make(), samples as never, { epochs: 1, verbose: 0, backend: 'cpu' }), {
    code: 'BAD_DATA',
    message: /element 0's xs has shape \[6\], one sample.*dataset\.batch\(size\)/,
  });
  const growing = tf.data.generator(function* () {
    yield { xs: x.slice(0, 4), ys: y.slice(0, 4) };
    yield { xs: x.slice(4, 8), ys: y.slice(4, 8) };
  });
  await t.rejects(fitDataset(dense.make(), growing as never, { epochs: 1, verbose: 0, backend: 'cpu' }), {
    code: 'BAD_DATA',
    message: /batch 1 has 8 samples and batch 0 4/,
  });
  const short = arrayBatches(x, y, 24, 8); // 3 batches; 2 epochs of 2 need 4
  await t.rejects(fitDataset(dense.make(), short, { epochs: 2, batchesPerEpoch: 2, verbose: 0, backend: 'cpu' }), {
    code: 'BAD_DATA',
    message: /ran out after 3 batches.*need 4/,
  });
  // an element without ys, or xs of strings: what it is, and what fitDataset takes
  const odd: [string, tf.data.Dataset<tf.TensorContainer>, RegExp][] = [
    ['no ys', tf.data.array(x.unstack()).map(xs => ({ xs })), /^fitDataset: element 0's ys is missing; each element/],
    [
      'xs of strings',
      tf.data.array(x.unstack()).map(() => ({ xs: tf.fill([6], 'a'), ys: tf.scalar(1) })),
      /^fitDataset: element 0's xs is a tensor of string; each element must be \{ xs, ys \} of tensors of numbers/,
    ],
  ];
  for (const [what, ds, message] of odd)
    await t.rejects(
      fitDataset(dense.make(), ds.batch(4), { epochs: 1, backend: 'cpu' }),
      { code: 'BAD_DATA', message },
      what,
    );
  tf.dispose([x, y]);
});

t.test(
  'refused before training: an endless dataset, a short batch mid-pass, a short one with batchesPerEpoch, NaN',
  async t => {
    const { x, y } = dense.data();
    const args = { epochs: 1, verbose: 0 as const, devices: 2, backend: 'cpu' as const };
    // counted without batchesPerEpoch, a repeat() never ended: the fit hung before step 1
    const endless = arrayBatches(x, y, 16, 8).repeat();
    await t.rejects(fitDataset(dense.make(), endless, args), {
      code: 'BAD_DATA',
      message: /fitDataset: the dataset never ends \(its size is Infinity.*give batchesPerEpoch/,
    });
    // batches of 8, 4, 8 (two batched datasets concatenated): the ring put batch 2 at 16, the loaders waited for it
    const concatenated = arrayBatches(x, y, 12, 8).concatenate(arrayBatches(x, y, 8, 8));
    await t.rejects(fitDataset(dense.make(), concatenated, args), {
      code: 'BAD_DATA',
      message: /batch 1 of the dataset's 3 has 4 samples and batch 0 8; only a pass's last batch may be smaller/,
    });
    const repeated = arrayBatches(x, y, 20, 8).repeat(); // 8, 8, 4, 8, …
    await t.rejects(fitDataset(dense.make(), repeated, { ...args, batchesPerEpoch: 3 }), {
      code: 'BAD_DATA',
      message: /batch 2 of epoch 1 \(batch 2 of the dataset\) has 4 samples.*data\.repeat\(\)\.batch\(size\)/,
    });
    const withNaN = tf.data.generator(function* () {
      yield { xs: x.slice(0, 8), ys: y.slice(0, 8) };
      const values = x.slice(8, 8).dataSync().slice();
      values[3 * 6 + 2] = NaN;
      yield { xs: tf.tensor(values, [8, 6]), ys: y.slice(8, 8) };
    });
    await t.rejects(fitDataset(dense.make(), withNaN as never, args), {
      code: 'BAD_DATA',
      message: /^fitDataset: batch 1's xs has NaN at sample 3, element 2; clean or impute/,
    });
    tf.dispose([x, y]);
  },
);

t.test(
  'a counting pass that goes on is noted, naming batchesPerEpoch (a generator that loops hung silently)',
  async t => {
    const { x, y } = dense.data();
    const [xs, ys] = [x.slice(0, 1), y.slice(0, 1)];
    const looping = tf.data.generator(function* () {
      for (let b = 0; ; b++) {
        if (b === COUNTING_NOTE + 1) throw new Error('the test stops the loop');
        yield { xs: xs.clone(), ys: ys.clone() };
      }
    });
    const warned: string[] = [];
    const warn = console.warn;
    console.warn = (m: string) => void warned.push(m);
    try {
      await t.rejects(fitDataset(dense.make(), looping as never, { epochs: 1, verbose: 0, backend: 'cpu' }), {
        message: /the test stops the loop/,
      });
    } finally {
      console.warn = warn;
    }
    t.same(warned, [
      `warning: fitDataset: still counting the dataset's first pass before training, ${COUNTING_NOTE} batches so ` +
        'far; if it never ends (a generator that loops, a repeat()), give batchesPerEpoch',
    ]);
    tf.dispose([x, y, xs, ys]);
  },
);

t.test('stopped by a callback after epoch 1 of 3: the fit returns, as model.fitDataset', async t => {
  const { x, y } = dense.data();
  const reference = dense.make();
  const model = twin(reference, dense.make);
  const stopAfterFirst = (m: tf.LayersModel) => ({
    onEpochEnd: async (epoch: number) => void (epoch === 0 && (m.stopTraining = true)),
  });
  const data = () => arrayBatches(x, y, 40, 8);
  const args = { epochs: 3, verbose: 0 as const, readAhead: 2 };
  const expected = await reference.fitDataset(data(), { ...args, callbacks: stopAfterFirst(reference) });
  const got = await fitDataset(model, data(), {
    ...args,
    callbacks: stopAfterFirst(model),
    devices: 2,
    backend: 'cpu',
  });
  t.same(got.epoch, [0], 'one epoch trained');
  compare(t, expected, got, reference, model);
  tf.dispose([x, y]);
  reference.dispose();
  model.dispose();
});

t.test("a dataset that throws mid-epoch fails the fit with its error; the run's threads end", async t => {
  const { x, y } = dense.data();
  const model = dense.make();
  const before = tf.memory().numTensors;
  // batch 4 of the training pass (the counting pass reads 6 batches first: the generator breaks on its 2nd pass)
  let passes = 0;
  const breaking = tf.data.generator(function* () {
    passes++;
    for (let b = 0; b < 6; b++) {
      if (passes === 2 && b === 4) throw new Error('generator broke at batch 4');
      yield { xs: x.slice(b * 8, 8), ys: y.slice(b * 8, 8) };
    }
  });
  await t.rejects(fitDataset(model, breaking as never, { epochs: 1, verbose: 0, devices: 2, backend: 'cpu' }), {
    message: /generator broke at batch 4/,
  });
  t.equal(tf.memory().numTensors, before, 'no tensor left behind');
  tf.dispose([x, y]);
  model.dispose();
});
