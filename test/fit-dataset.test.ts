// fitDataset(model, dataset, args) equals tfjs's model.fitDataset on one engine for a dataset of {xs, ys} batches:
// the History, every callback call with its logs, the final weights; validation from a dataset and from tensors.
// And what fit refuses, before any thread starts: an uncompiled model, a loss tandem does not train, a key fit sets.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { fit, fitDataset, TandemError } from '../src/index.js';
import { FIT_CASES, twin, worstRelative, worstWeightDifference } from './fixtures/fit-models.js';

await tf.setBackend('cpu');
const dense = FIT_CASES[0];

/** {xs, ys} batches of 12 over rows [from, to) of x and y. */
function batches(x: tf.Tensor, y: tf.Tensor, from: number, to: number) {
  const rows = (v: tf.Tensor) => tf.data.array(v.slice(from, to - from).unstack());
  return tf.data.zip({ xs: rows(x), ys: rows(y) }).batch(12) as unknown as tf.data.Dataset<{
    xs: tf.Tensor;
    ys: tf.Tensor;
  }>;
}

type Call = [string, number | undefined, string[] | undefined];
const recorder = (calls: Call[]): tf.CustomCallbackArgs => {
  const rec = (hook: string) => async (a?: number | tf.Logs, b?: tf.Logs) => {
    const [at, logs] = typeof a === 'number' ? [a, b] : [undefined, a];
    calls.push([hook, at, logs && Object.keys(logs)]);
  };
  return { onEpochBegin: rec('epochBegin'), onBatchBegin: rec('batchBegin'), onEpochEnd: rec('epochEnd') };
};

for (const validation of ['dataset', 'tensors'] as const) {
  t.test(`fitDataset on 2 devices equals model.fitDataset (validation from ${validation})`, async t => {
    const { x, y } = dense.data();
    const reference = dense.make();
    const model = twin(reference, dense.make);
    const validationData =
      validation === 'dataset' ? batches(x, y, 36, 48) : ([x.slice(36, 12), y.slice(36, 12)] as [tf.Tensor, tf.Tensor]);
    const expectedCalls: Call[] = [],
      calls: Call[] = [];
    const args = { epochs: 2, validationData, validationBatchSize: 6, verbose: 0 as const };
    const expected = await reference.fitDataset(batches(x, y, 0, 36), { ...args, callbacks: recorder(expectedCalls) });
    const got = await fitDataset(model, batches(x, y, 0, 36), {
      ...args,
      callbacks: recorder(calls),
      devices: 2,
      backend: 'cpu',
    });
    t.same(got.epoch, expected.epoch, 'History.epoch');
    t.same(Object.keys(got.history).sort(), Object.keys(expected.history).sort(), 'History keys');
    for (const key of Object.keys(expected.history)) {
      const d = worstRelative(expected.history[key] as number[], got.history[key] as number[]);
      t.ok(d <= 1e-4, `history.${key}: relative difference ${d.toExponential(2)} ≤ 1e-4`);
    }
    t.same(calls, expectedCalls, "the callbacks' calls and log keys (batch, size before onBatchBegin)");
    const w = worstWeightDifference(reference, model);
    t.ok(w <= 1e-4, `final weights: max |Δ| ${w.toExponential(2)}`);
    tf.dispose([x, y, ...(Array.isArray(validationData) ? validationData : [])]);
    reference.dispose();
    model.dispose();
  });
}

t.test('fit refuses what it cannot train like model.fit, naming it', async t => {
  const { x, y } = dense.data();
  const bare = tf.sequential({ layers: [tf.layers.dense({ units: 3, inputShape: [6], activation: 'softmax' })] });
  await t.rejects(fit(bare, x, y), { code: 'BAD_MODEL', message: /not compiled.*model\.compile/ });
  const custom = dense.make();
  // a loss over the batch's samples together: each device's share would give another value than model.fit's
  const centred = (a: tf.Tensor, b: tf.Tensor) => tf.metrics.meanSquaredError(a, tf.sub(b, tf.mean(b, 0, true)));
  custom.compile({ optimizer: 'sgd', loss: centred });
  await t.rejects(fit(custom, x, y), { code: 'BAD_CONFIG', message: /computes over a batch's samples together/ });
  const logits = tf.sequential({ layers: [tf.layers.dense({ units: 3, inputShape: [6] })] });
  logits.compile({ optimizer: 'sgd', loss: 'categoricalCrossentropy' });
  await t.rejects(fit(logits, x, y), { code: 'BAD_MODEL', message: /ends in 'linear', not 'softmax'/ });
  // each names the argument to use instead (it named compile() and batchSize, epochs, shuffle for every one)
  await t.rejects(fit(dense.make(), x, y, { batch: 4 } as never), {
    code: 'BAD_CONFIG',
    message: /^fit: batch comes from fit's batchSize; remove 'batch'/,
  });
  await t.rejects(fit(dense.make(), x, y, { lr: 0.1 } as never), {
    code: 'BAD_CONFIG',
    message: /^fit: lr comes from the optimizer given to the model's compile\(\) .*lrSchedule; remove 'lr'/,
  });
  await t.rejects(fit(dense.make(), x, y, { classWeight: { 0: 2 } }), { code: 'BAD_CONFIG', message: /classWeight/ });
  const err = await fit(dense.make(), x, tf.zeros([48, 4])).catch((e: unknown) => e);
  t.ok(
    err instanceof TandemError &&
      err.code === 'BAD_DATA' &&
      /y of shape \[48, 4\].*output shape \[3\]/.test(err.message),
    "a y not of the output's shape: BAD_DATA naming both shapes",
  );
  tf.dispose([x, y]);
});
