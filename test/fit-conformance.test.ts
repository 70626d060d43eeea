// fit conformance: tandem's fit(model, x, y, args) on 1, 2 (and 3) devices equals tfjs's own model.fit on one engine
// (cpu on both sides) from the same initial weights, with shuffle: false: the same History keys and per-epoch values
// (relative 1e-4), the same onEpochEnd logs, the same final weights in the passed model (1e-4), no tensor left behind;
// on the 21 models of fixtures/fit-models.ts and fit-models-more.ts (targets of every shape, every metric kind, a
// custom layer via plugins, two inputs).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { fit, fitDataset } from '../src/index.js';
import { FIT_CASES, twin, worstRelative, worstWeightDifference } from './fixtures/fit-models.js';
import { tensorsBesidesOptimizer } from './fixtures/fit-case-helpers.js';
import { MULTI_INPUT_CASES } from './fixtures/fit-models-more.js';

const REL = 1e-4;
const WEIGHTS = 1e-4;
const EPOCHS = 2;
const BATCH = 12;

await tf.setBackend('cpu');

type EpochLog = { epoch: number; logs: Record<string, number> };

/** An onEpochEnd recorder (a CustomCallbackArgs object, as tfjs users pass them). */
function recorder(into: EpochLog[]) {
  return { onEpochEnd: async (epoch: number, logs?: tf.Logs) => void into.push({ epoch, logs: { ...logs } as never }) };
}

/**
 * What these cases leave out, and why (never skipped silently):
 * - random layers (Dropout, GaussianNoise, AlphaDropout, SpatialDropout): tandem draws their masks from its seeded
 *   per-device streams, tfjs from Math.random, so the two are equal in distribution and never in values;
 * - multi-output models: in fit-outputs.test.ts, fit-inputs-outputs.test.ts, fit-dataset-outputs.test.ts and
 *   evaluate-outputs.test.ts (the last test here checks that ys of one tensor are refused, naming the outputs).
 */
const EXCLUDED = [
  'random layers: masks from seeded streams, not Math.random',
  'multi-output: in fit-outputs.test.ts and its neighbours',
];

const CASES: {
  name: string;
  make(): tf.LayersModel;
  data(): { x: tf.Tensor | tf.Tensor[]; y: tf.Tensor };
  options?: { plugins: string[] };
}[] = [...FIT_CASES, ...MULTI_INPUT_CASES];

for (const [k, c] of CASES.entries()) {
  // Every case on 2 devices; the first two on 1 device too, the first on 3 (the suite's time on a shared machine);
  // validation (its own threads) on every other case and on those.
  const counts = k === 0 ? [1, 2, 3] : k === 1 ? [1, 2] : k === 7 ? [2, 3] : [2];
  const validationSplit = k < 2 || k % 2 === 0 ? 0.25 : undefined;
  t.test(`${c.name}: fit on ${counts.join(' and ')} device(s) equals model.fit`, async t => {
    const { x, y } = c.data();
    const reference = c.make();
    const start = twin(reference, c.make);
    const refLogs: EpochLog[] = [];
    const args = { epochs: EPOCHS, batchSize: BATCH, shuffle: false, validationSplit, verbose: 0 as const };
    const expected = await reference.fit(x, y, { ...args, callbacks: recorder(refLogs) });
    for (const devices of counts) {
      const model = twin(start, c.make);
      const logs: EpochLog[] = [];
      const before = await tensorsBesidesOptimizer(model);
      const got = await fit(model, x, y, { ...args, ...c.options, callbacks: recorder(logs), devices, backend: 'cpu' });
      t.equal(await tensorsBesidesOptimizer(model), before, `${devices} device(s): fit leaves no tensor behind`);
      t.same(got.epoch, expected.epoch, `${devices} device(s): History.epoch`);
      t.same(Object.keys(got.history).sort(), Object.keys(expected.history).sort(), `${devices}: History keys`);
      for (const key of Object.keys(expected.history)) {
        const d = worstRelative(expected.history[key] as number[], got.history[key] as number[]);
        t.ok(d <= REL, `${devices} device(s): history.${key} relative difference ${d.toExponential(2)} ≤ ${REL}`);
      }
      t.same(
        logs.map(l => [l.epoch, Object.keys(l.logs)]),
        refLogs.map(l => [l.epoch, Object.keys(l.logs)]),
        `${devices} device(s): onEpochEnd called per epoch with tfjs's keys, in tfjs's order`,
      );
      const logDiff = Math.max(
        ...refLogs.map((l, i) => worstRelative(Object.values(l.logs), Object.values(logs[i]?.logs ?? {}))),
      );
      t.ok(logDiff <= REL, `${devices} device(s): onEpochEnd values relative difference ${logDiff.toExponential(2)}`);
      const w = worstWeightDifference(reference, model);
      t.ok(
        w <= WEIGHTS,
        `${devices} device(s): final weights in the model, max |Δ| ${w.toExponential(2)} ≤ ${WEIGHTS}`,
      );
      model.dispose();
    }
    tf.dispose([x, y]);
    reference.dispose();
    start.dispose();
  });
}

t.test('the exclusions, named: fitDataset and fit refuse one y for a model of two outputs, naming them', async t => {
  t.comment(`excluded: ${EXCLUDED.join('; ')}`);
  const input = tf.input({ shape: [3] });
  const a = tf.layers.dense({ units: 2, activation: 'softmax' }).apply(input) as tf.SymbolicTensor;
  const b = tf.layers.dense({ units: 1 }).apply(input) as tf.SymbolicTensor;
  const model = tf.model({ inputs: input, outputs: [a, b] });
  model.compile({ optimizer: 'sgd', loss: ['categoricalCrossentropy', 'meanSquaredError'] });
  const x = tf.zeros([4, 3]);
  const dataset = tf.data.array([{ xs: x, ys: x }]);
  await t.rejects(fitDataset(model, dataset, { epochs: 1, backend: 'cpu' }), {
    code: 'BAD_DATA',
    message: /fitDataset: the model has 2 outputs/,
  });
  await t.rejects(fit(model, x, x, { backend: 'cpu' }), { code: 'BAD_DATA', message: /y as a Tensor\[\] of 2/ });
  tf.dispose(x);
  model.dispose();
});
