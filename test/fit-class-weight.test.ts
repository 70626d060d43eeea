// fit's classWeight: each sample's loss times its class's weight, then the batch mean, as tfjs's model.fit computes
// it; tandem's fit on 1, 2 and 3 devices equals model.fit on one engine (cpu, shuffle: false): History relative 1e-4
// (loss weighted, val_loss not, as tfjs), final weights 1e-4; a partial last batch included. A class of the data
// without a weight is refused, as tfjs refuses it.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { fit, resolveConfig } from '../src/index.js';
import { FIT_CASES, twin, worstRelative, worstWeightDifference } from './fixtures/fit-models.js';

await tf.setBackend('cpu');

const CASES: { index: number; classWeight: tf.ClassWeight; devices: number[] }[] = [
  { index: 0, classWeight: { 0: 1, 1: 2.5, 2: 0.5 }, devices: [1, 2, 3] }, // one-hot, sgd
  { index: 1, classWeight: { 0: 0.5, 1: 1.5, 2: 3, 3: 1 }, devices: [2] }, // sparse labels, adam
  { index: 5, classWeight: { 0: 0.3, 1: 2 }, devices: [2] }, // binary, sigmoid
];

for (const k of CASES) {
  const c = FIT_CASES[k.index];
  t.test(`${c.name} with classWeight: fit on ${k.devices.join(', ')} device(s) equals model.fit`, async t => {
    const data = c.data();
    const x = data.x.slice(0, 47),
      y = data.y.slice(0, 47); // 3 batches of 12, then 11
    tf.dispose([data.x, data.y]);
    const reference = c.make();
    const start = twin(reference, c.make);
    const args = { epochs: 2, batchSize: 12, shuffle: false, verbose: 0 as const, validationSplit: 0.25 };
    const plain = twin(start, c.make);
    const unweighted = await plain.fit(x, y, args);
    const expected = await reference.fit(x, y, { ...args, classWeight: k.classWeight });
    const d0 = worstRelative(unweighted.history.loss as number[], expected.history.loss as number[]);
    t.ok(d0 > 1e-3, `the weights change model.fit's loss (relative ${d0.toExponential(2)})`);
    for (const devices of k.devices) {
      const model = twin(start, c.make);
      const got = await fit(model, x, y, { ...args, classWeight: k.classWeight, devices, backend: 'cpu' });
      t.same(Object.keys(got.history).sort(), Object.keys(expected.history).sort(), `${devices}: History keys`);
      for (const key of Object.keys(expected.history)) {
        const d = worstRelative(expected.history[key] as number[], got.history[key] as number[]);
        t.ok(d <= 1e-4, `${devices} device(s): history.${key} relative difference ${d.toExponential(2)} ≤ 1e-4`);
      }
      const w = worstWeightDifference(reference, model);
      t.ok(w <= 1e-4, `${devices} device(s): final weights, max |Δ| ${w.toExponential(2)} ≤ 1e-4`);
      model.dispose();
    }
    tf.dispose([x, y]);
    [reference, start, plain].forEach(m => m.dispose());
  });
}

t.test('a class of the data without a weight: refused, as tfjs refuses it', async t => {
  const c = FIT_CASES[0];
  const { x, y } = c.data();
  const model = c.make();
  await t.rejects(model.fit(x, y, { classWeight: { 0: 2 }, verbose: 0 }), /classWeight must contain all classes/);
  await t.rejects(fit(model, x, y, { classWeight: { 0: 2 }, backend: 'cpu' }), {
    code: 'BAD_CONFIG',
    message: /classWeight must contain all classes.*class 1/,
  });
  tf.dispose([x, y]);
  model.dispose();
});

t.test('the run options fit sets, checked: classWeight and partialBatch', async t => {
  const base = { model: 'mlp', data: 'synthetic-images', imageSize: [8, 8, 1], classes: 4, datasetSize: 44, batch: 8 };
  await t.rejects(resolveConfig({ ...base, classWeight: [1, 2] }), {
    code: 'BAD_CONFIG',
    message: /classWeight.*2 weights for 4 classes/,
  });
  await t.rejects(resolveConfig({ ...base, classWeight: [1, -1, 1, 1] }), { code: 'BAD_CONFIG', message: /≥ 0/ });
  await t.rejects(resolveConfig({ ...base, method: 'local-head', devices: 2, partialBatch: true }), {
    code: 'BAD_CONFIG',
    message: /partialBatch.*data-parallel/,
  });
  const cfg = await resolveConfig({ ...base, partialBatch: true, classWeight: [1, 2, 1, 0.5] });
  t.equal(cfg.stepsPerEpoch, 6, '44 samples in batches of 8 with partialBatch: 6 steps an epoch');
  t.same(cfg.classWeight, [1, 2, 1, 0.5], 'the weights, one per class');
});
