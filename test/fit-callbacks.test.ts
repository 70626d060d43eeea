// fit's callbacks run as tfjs's model.fit runs them: the same hooks in the same order with the same logs
// (CustomCallbackArgs objects and tf.Callback subclasses), tf.callbacks.earlyStopping stopping at the same epoch, and
// model.stopTraining set by a callback ending the fit after that epoch; initialEpoch as model.fit numbers it; no
// epoch to run (epochs 0) as model.fit runs none; one fit of a model at a time, as model.fit refuses a second; and a
// partial last batch trained, with its batch logs.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { fit, fitDataset } from '../src/index.js';
import { FIT_CASES, twin, worstRelative, worstWeightDifference } from './fixtures/fit-models.js';

await tf.setBackend('cpu');
const dense = FIT_CASES[0];
const base = { batchSize: 12, shuffle: false, verbose: 0 as const };

type Call = { hook: string; at?: number; logs: Record<string, number> | undefined };

/** Every hook of a CustomCallbackArgs object, recorded with a copy of its logs at the time of the call. */
function allHooks(calls: Call[]): tf.CustomCallbackArgs {
  const rec = (hook: string) => async (a?: number | tf.Logs, b?: tf.Logs) => {
    const [at, logs] = typeof a === 'number' ? [a, b] : [undefined, a];
    calls.push({ hook, at, logs: logs === undefined ? undefined : ({ ...logs } as Record<string, number>) });
  };
  return {
    onTrainBegin: rec('onTrainBegin'),
    onEpochBegin: rec('onEpochBegin'),
    onBatchBegin: rec('onBatchBegin'),
    onBatchEnd: rec('onBatchEnd'),
    onEpochEnd: rec('onEpochEnd'),
    onTrainEnd: rec('onTrainEnd'),
  };
}

/** A tf.Callback subclass, as users write them: counts its epochs. */
class EpochCounter extends tf.Callback {
  epochs: number[] = [];
  override async onEpochEnd(epoch: number): Promise<void> {
    this.epochs.push(epoch);
  }
}

t.test('every hook in tfjs order with tfjs logs, a tf.Callback subclass too', async t => {
  const { x, y } = dense.data();
  const reference = dense.make();
  const model = twin(reference, dense.make);
  const args = { ...base, epochs: 2, validationSplit: 0.25 };
  const expected: Call[] = [],
    got: Call[] = [];
  const refCounter = new EpochCounter(),
    counter = new EpochCounter();
  await reference.fit(x, y, { ...args, callbacks: [allHooks(expected)] });
  await reference.fit(x, y, { ...args, epochs: 1, callbacks: [refCounter] });
  await fit(model, x, y, { ...args, callbacks: [allHooks(got)], backend: 'cpu' });
  await fit(model, x, y, { ...args, epochs: 1, callbacks: [counter], backend: 'cpu' });
  t.same(
    got.map(c => [c.hook, c.at, c.logs && Object.keys(c.logs)]),
    expected.map(c => [c.hook, c.at, c.logs && Object.keys(c.logs)]),
    'the same hooks, in the same order, with the same log keys',
  );
  const worst = Math.max(
    ...expected.map((c, i) => worstRelative(Object.values(c.logs ?? {}), Object.values(got[i]?.logs ?? {}))),
  );
  t.ok(worst <= 1e-4, `every logged value within relative 1e-4 (worst ${worst.toExponential(2)})`);
  t.same(counter.epochs, refCounter.epochs, 'a tf.Callback subclass sees the epochs model.fit shows it');
  t.ok(worstWeightDifference(reference, model) <= 1e-4, 'and the weights after both fits agree');
  tf.dispose([x, y]);
  reference.dispose();
  model.dispose();
});

t.test('tf.callbacks.earlyStopping stops at the epoch model.fit stops at', async t => {
  const { x, y } = dense.data();
  const reference = dense.make();
  const model = twin(reference, dense.make);
  // No epoch after the first improves val_loss by 10: both stop after epoch 1 (patience 1) of 5.
  const stopper = () => tf.callbacks.earlyStopping({ monitor: 'val_loss', minDelta: 10, patience: 1 });
  const args = { ...base, epochs: 5, validationSplit: 0.25 };
  const expected = await reference.fit(x, y, { ...args, callbacks: stopper() });
  const got = await fit(model, x, y, { ...args, callbacks: stopper(), devices: 2, backend: 'cpu' });
  t.equal(expected.epoch.length, 2, 'model.fit stopped after 2 epochs');
  t.same(got.epoch, expected.epoch, 'fit stopped at the same epoch');
  t.ok(worstRelative(expected.history.val_loss as number[], got.history.val_loss as number[]) <= 1e-4, 'val_loss');
  t.ok(worstWeightDifference(reference, model) <= 1e-4, 'the weights of the epoch it stopped at');
  tf.dispose([x, y]);
  reference.dispose();
  model.dispose();
});

t.test('model.stopTraining set in onEpochEnd ends the fit after that epoch', async t => {
  const { x, y } = dense.data();
  const model = dense.make();
  const seen: number[] = [];
  const history = await fit(model, x, y, {
    ...base,
    epochs: 4,
    backend: 'cpu',
    callbacks: {
      onEpochEnd: async epoch => {
        seen.push(epoch);
        if (epoch === 0) model.stopTraining = true;
      },
    },
  });
  t.same(seen, [0], 'onEpochEnd ran once');
  t.same(history.epoch, [0], 'the History has the one epoch trained');
  t.equal(Object.keys(history.history).sort().join(), 'acc,loss', 'loss and acc, no val_ keys without validation');
  tf.dispose([x, y]);
  model.dispose();
});

t.test('initialEpoch: the epochs from it on, numbered as model.fit numbers them', async t => {
  const { x, y } = dense.data();
  const reference = dense.make();
  const model = twin(reference, dense.make);
  const args = { ...base, epochs: 3, initialEpoch: 1 };
  const expected = await reference.fit(x, y, args);
  const got = await fit(model, x, y, { ...args, backend: 'cpu' });
  t.same(got.epoch, expected.epoch, `History.epoch ${JSON.stringify(expected.epoch)}`);
  t.ok(worstRelative(expected.history.loss as number[], got.history.loss as number[]) <= 1e-4, 'loss per epoch');
  t.ok(worstWeightDifference(reference, model) <= 1e-4, 'final weights');
  tf.dispose([x, y]);
  reference.dispose();
  model.dispose();
});

t.test('no epoch to run (epochs 0, initialEpoch ≥ epochs): what model.fit does, and no weight moves', async t => {
  const { x, y } = dense.data();
  const reference = dense.make();
  const model = twin(reference, dense.make);
  for (const args of [{ epochs: 0 }, { epochs: 2, initialEpoch: 2 }, { epochs: 1, initialEpoch: 4 }]) {
    const expected: Call[] = [],
      got: Call[] = [];
    const want = await reference.fit(x, y, { ...base, ...args, callbacks: allHooks(expected) });
    const history = await fit(model, x, y, { ...base, ...args, callbacks: allHooks(got), backend: 'cpu' });
    const what = JSON.stringify(args);
    t.same(got, expected, `${what}: the hooks model.fit calls (${expected.map(c => c.hook).join(', ')})`);
    t.same([history.epoch, history.history], [want.epoch, want.history], `${what}: model.fit's empty History`);
    t.equal(worstWeightDifference(reference, model), 0, `${what}: the weights as they were`);
  }
  await t.rejects(fitDataset(model, tf.data.array([{ xs: x, ys: y }]), { epochs: 0, backend: 'cpu' }), {
    code: 'BAD_CONFIG',
    message: /fitDataset: epochs must be an integer ≥ 1, got 0/, // model.fitDataset refuses it too
  });
  tf.dispose([x, y]);
  reference.dispose();
  model.dispose();
});

t.test('one fit of a model at a time, as model.fit has it; the model free again after a fit that failed', async t => {
  const { x, y } = dense.data();
  for (const sequential of [true, false]) {
    const model = sequential
      ? dense.make()
      : (() => {
          const input = tf.input({ shape: [6] });
          const out = tf.layers.dense({ units: 3, activation: 'softmax' }).apply(input) as tf.SymbolicTensor;
          const m = tf.model({ inputs: input, outputs: out });
          m.compile({ optimizer: 'sgd', loss: 'categoricalCrossentropy' });
          return m;
        })();
    const kind = sequential ? 'Sequential' : 'functional';
    const first = fit(model, x, y, { ...base, epochs: 2, backend: 'cpu' });
    const busy = { code: 'BAD_CONFIG', message: /another fit of this model is ongoing/ };
    await t.rejects(fit(model, x, y, { ...base, backend: 'cpu' }), busy, `${kind}: a second fit is refused`);
    await t.rejects(
      fitDataset(model, tf.data.array([{ xs: x, ys: y }]), { epochs: 1, backend: 'cpu' }),
      busy,
      'fitDataset too',
    );
    await t.rejects(model.fit(x, y, base), /another fit\(\) call is ongoing/, "tfjs's own model.fit refuses it too");
    await first;
    const failed = fit(model, x, y, { ...base, batchSize: 0, backend: 'cpu' });
    await t.rejects(failed, { code: 'BAD_CONFIG', message: /batchSize/ }, 'a fit that fails');
    const after = await fit(model, x, y, { ...base, backend: 'cpu' });
    t.equal(after.epoch.length, 1, `${kind}: after both, the next fit runs`);
    const own = await model.fit(x, y, { ...base, epochs: 1 });
    t.equal(own.epoch.length, 1, "and so does tfjs's model.fit");
    const during = model.fit(x, y, { ...base, epochs: 2 });
    await t.rejects(fit(model, x, y, { ...base, backend: 'cpu' }), busy, "fit refuses while tfjs's model.fit runs");
    await during;
    model.dispose();
  }
  tf.dispose([x, y]);
});

t.test('a batch size that leaves samples over: the last, smaller batch trained, with its batch logs', async t => {
  const { x, y } = dense.data();
  const reference = dense.make();
  const model = twin(reference, dense.make);
  const warnings: Error[] = [];
  const onWarning = (w: Error) => warnings.push(w);
  process.on('warning', onWarning);
  t.teardown(() => void process.off('warning', onWarning));
  const expected: Call[] = [],
    got: Call[] = [];
  const args = { ...base, batchSize: 10, epochs: 1 }; // 48 samples: 4 batches of 10, then 8
  await reference.fit(x, y, { ...args, callbacks: allHooks(expected) });
  const history = await fit(model, x, y, { ...args, callbacks: allHooks(got), devices: 2, backend: 'cpu' });
  const sizes = (calls: Call[]) => calls.filter(c => c.hook === 'onBatchEnd').map(c => c.logs?.size);
  t.same(sizes(got), [10, 10, 10, 10, 8], 'five batches, the last of 8');
  t.same(sizes(got), sizes(expected), "model.fit's batches");
  const worst = Math.max(
    ...expected.map((c, i) => worstRelative(Object.values(c.logs ?? {}), Object.values(got[i]?.logs ?? {}))),
  );
  t.ok(worst <= 1e-4, `every logged value within relative 1e-4 (worst ${worst.toExponential(2)})`);
  t.same(history.epoch, [0], 'one epoch');
  t.ok(worstWeightDifference(reference, model) <= 1e-4, 'the weights of model.fit');
  await new Promise(resolve => setImmediate(resolve)); // a warning is emitted on the next tick
  t.same(
    warnings.map(w => w.message),
    [],
    'no warning',
  );
  tf.dispose([x, y]);
  reference.dispose();
  model.dispose();
});
