// The optimizer's state goes on between calls, as tfjs's keeps it (src/fit/fit-optimizer-state.ts): a model trained
// in turns, tfjs's model.fit once, then tandem's fit one epoch a call, then model.fit again, equals a twin trained by
// model.fit alone (losses relative 1e-4, weights 1e-5, the optimizer's iterations and its state arrays), for every
// optimizer (tfjs's Adamax, which has no getWeights, through its fields); and a call leaves no tensor but the
// optimizer's state. A model saved with includeOptimizer (src/config/saved-model.ts) trains on from its state as
// tf.loadLayersModel and model.fit do; naming an optimizer starts afresh; a state that does not fit the model is
// refused naming the file.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fit, resolveConfig, train, trainReference } from '../src/index.js';
import { tensorsBesidesOptimizer } from './fixtures/fit-case-helpers.js';
import { tfjsOptimizerState } from '../src/optim/tfjs-optimizer-state.js';
import { worstRelative, worstWeightDifference } from './fixtures/fit-models.js';

await tf.setBackend('cpu');

const N = 48;
const BATCH = 12;
const x = tf.tensor2d(
  Float32Array.from({ length: N * 5 }, (_, i) => Math.sin(i * 1.7) * 0.8),
  [N, 5],
);
const labels = Int32Array.from({ length: N }, (_, i) => (i * 7) % 3);
const y = tf.oneHot(tf.tensor1d(labels, 'int32'), 3);

const OPTIMIZERS: [string, () => tf.Optimizer][] = [
  ['adam', () => tf.train.adam(0.02)],
  ['rmsprop with momentum', () => tf.train.rmsprop(0.01, 0.9, 0.5, 1e-7, false)],
  ['momentum (nesterov)', () => tf.train.momentum(0.05, 0.9, true)],
  ['adagrad', () => tf.train.adagrad(0.1)],
  ['adadelta', () => tf.train.adadelta(1)],
  ['sgd', () => tf.train.sgd(0.1)],
  ['momentum 0 (an accumulator tandem does not keep)', () => tf.train.momentum(0.1, 0)],
  ['adamax (no getWeights in tfjs)', () => tf.train.adamax(0.02, 0.9, 0.999, 1e-7, 0.01)],
];

function make(optimizer: tf.Optimizer, seed = 1): tf.LayersModel {
  const m = tf.sequential();
  const init = (s: number) => tf.initializers.glorotUniform({ seed: s });
  m.add(tf.layers.dense({ units: 8, inputShape: [5], activation: 'relu', kernelInitializer: init(seed) }));
  m.add(tf.layers.dense({ units: 3, activation: 'softmax', kernelInitializer: init(seed + 1) }));
  m.compile({ optimizer, loss: 'categoricalCrossentropy' });
  return m;
}

/** The optimizer's iterations (tfjs's getter) and state arrays' values (the iterations' scalar disposed). */
async function stateOf(model: tf.LayersModel): Promise<{ iterations: number; arrays: number[][] }> {
  const [iter, ...rest] = (await tfjsOptimizerState(model.optimizer))!;
  iter.tensor.dispose();
  return { iterations: model.optimizer.iterations, arrays: rest.map(r => Array.from(r.tensor.dataSync())) };
}

const once = { epochs: 1, batchSize: BATCH, shuffle: false, verbose: 0 as const };

for (const [name, optimizer] of OPTIMIZERS) {
  t.test(`${name}: model.fit, tandem's fit three times, model.fit equal model.fit five times`, async t => {
    const reference = make(optimizer());
    const model = make(optimizer());
    model.setWeights(reference.getWeights());
    await reference.fit(x, y, once);
    await model.fit(x, y, once); // tfjs first: tandem's fit goes on from its state
    for (let call = 1; call <= 3; call++) {
      const want = await reference.fit(x, y, once);
      const before = await tensorsBesidesOptimizer(model);
      const got = await fit(model, x, y, { ...once, devices: 2, backend: 'cpu' });
      t.equal(await tensorsBesidesOptimizer(model), before, `call ${call}: no tensor left but the optimizer's state`);
      const d = worstRelative(want.history.loss as number[], got.history.loss as number[]);
      t.ok(d <= 1e-4, `call ${call}: loss ${got.history.loss[0]} against ${want.history.loss[0]}`);
    }
    const [a, b] = [await stateOf(reference), await stateOf(model)];
    t.equal(b.iterations, a.iterations, `the optimizer's iterations: ${a.iterations}`);
    if (name.startsWith('momentum 0')) {
      // tfjs's accumulator at momentum 0 is the last gradient, never read again: tandem keeps none, and tfjs's next
      // model.fit starts it at 0 (the weights below agree)
      t.equal(b.arrays.length, 0, 'no state arrays');
    } else {
      t.equal(b.arrays.length, a.arrays.length, `${a.arrays.length} state arrays`);
      const worst = Math.max(0, ...a.arrays.map((arr, k) => worstRelative(arr, b.arrays[k] ?? [])));
      t.ok(worst <= 1e-4, `the state arrays within ${worst.toExponential(2)} relative`);
    }
    const w = worstWeightDifference(reference, model);
    t.ok(w <= 1e-5, `weights after tandem's calls within ${w.toExponential(2)}`);
    await reference.fit(x, y, once);
    await model.fit(x, y, once); // tfjs after: it goes on from the state tandem left
    const after = worstWeightDifference(reference, model);
    t.ok(after <= 1e-5, `and after model.fit again, within ${after.toExponential(2)}`);
    reference.dispose();
    model.dispose();
  });
}

/** A compiled model saved as `model.save(…, { includeOptimizer: true })` writes it, into `dir/name.json`. */
async function saveWithOptimizer(
  model: tf.LayersModel,
  dir: string,
  name: string,
): Promise<{ file: string; artifacts: tf.io.ModelArtifacts }> {
  let artifacts: tf.io.ModelArtifacts | undefined;
  await model.save(
    tf.io.withSaveHandler(async a => {
      artifacts = a;
      return { modelArtifactsInfo: { dateSaved: new Date(), modelTopologyType: 'JSON' } };
    }),
    { includeOptimizer: true },
  );
  const a = artifacts!;
  writeFileSync(path.join(dir, `${name}.bin`), new Uint8Array(a.weightData as ArrayBuffer));
  const json = {
    format: 'layers-model',
    modelTopology: a.modelTopology,
    trainingConfig: a.trainingConfig,
    weightsManifest: [{ paths: [`${name}.bin`], weights: a.weightSpecs }],
  };
  const file = path.join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(json));
  return { file, artifacts: a };
}

/** A copy of saved model `file` as `name`, its manifest and weights changed by `change`. */
function changed(
  file: string,
  name: string,
  change: (specs: tf.io.WeightsManifestEntry[], bytes: Uint8Array) => Uint8Array,
): string {
  const json = JSON.parse(readFileSync(file, 'utf8')) as { weightsManifest: { paths: string[]; weights: [] }[] };
  const [group] = json.weightsManifest;
  const bytes = change(group.weights, new Uint8Array(readFileSync(path.join(path.dirname(file), group.paths[0]))));
  group.paths = [`${name}.bin`];
  writeFileSync(path.join(path.dirname(file), `${name}.bin`), bytes);
  const out = path.join(path.dirname(file), `${name}.json`);
  writeFileSync(out, JSON.stringify(json));
  return out;
}

/** A data module of x's rows and their labels, in order. */
function dataModule(dir: string): string {
  writeFileSync(path.join(dir, 'x.bin'), new Uint8Array(x.dataSync().buffer));
  const file = path.join(dir, 'data.mjs');
  writeFileSync(
    file,
    `import { readFileSync } from 'node:fs';
const x = new Float32Array(new Uint8Array(readFileSync(new URL('x.bin', import.meta.url))).buffer);
const labels = ${JSON.stringify(Array.from(labels))};
export default () => ({
  size: ${N}, sampleShape: [5], classes: 3,
  read: (i, out, offset) => (out.set(x.subarray(i * 5, i * 5 + 5), offset), labels[i]),
  label: i => labels[i],
});
`,
  );
  return file;
}

t.test('a model saved with its optimizer trains on from its state, as tf.loadLayersModel and model.fit', async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-optimizer-state-'));
  const sparse = tf.tensor1d(labels, 'float32');
  const saved = make(tf.train.adam(0.02), 5);
  saved.compile({ optimizer: saved.optimizer, loss: 'sparseCategoricalCrossentropy' });
  await saved.fit(x, sparse, { ...once, epochs: 2 });
  const { file, artifacts } = await saveWithOptimizer(saved, dir, 'adam');
  const data = dataModule(dir);
  const base = {
    data,
    batch: BATCH,
    shuffle: false,
    devices: 2,
    backend: 'cpu' as const,
    heldOut: 0,
    steps: N / BATCH,
  };
  const resolved = await resolveConfig({ ...base, model: file });
  t.equal(resolved.optimizer.stepsBefore, (2 * N) / BATCH, 'the optimizer counts on from the saved iterations');
  t.equal(resolved.optimizerStateFrom, file, 'and starts from the saved state');
  const run = await train({ ...base, model: file });
  const reference = await tf.loadLayersModel(tf.io.fromMemory(artifacts));
  await reference.fit(x, sparse, once);
  const differs = (weights: { values: Float32Array }[]) =>
    Math.max(
      ...reference.trainableWeights.map((v, i) =>
        Array.from(v.read().dataSync()).reduce((m, value, k) => Math.max(m, Math.abs(value - weights[i].values[k])), 0),
      ),
    );
  const d = differs(run.weights);
  t.ok(d <= 1e-5, `the run's weights are the reference's within ${d.toExponential(2)}`);
  const single = await trainReference({ ...base, model: file });
  const far = Math.max(
    ...single.weights.map((w, i) =>
      w.values.reduce((m, v, k) => Math.max(m, Math.abs(v - run.weights[i].values[k])), 0),
    ),
  );
  t.ok(far <= 1e-5, `and trainReference's (one engine, tfjs's optimizer seeded) within ${far.toExponential(2)}`);
  const afresh = await train({ ...base, model: file, optimizer: 'adam', lr: 0.02 });
  t.equal(afresh.config.optimizerStateFrom, undefined, 'naming the optimizer: it starts afresh');
  t.ok(differs(afresh.weights) > 1e-3, `which trains otherwise (${differs(afresh.weights).toExponential(2)})`);

  const heads = await resolveConfig({ ...base, model: file, method: 'partial-fc', embedding: 3 });
  t.same(
    [heads.optimizerStateFrom, heads.optimizer.stepsBefore],
    [undefined, undefined],
    'a method of local heads: afresh',
  );
  t.match(heads.optimizerWarning, /holds its optimizer's state, which method partial-fc does not take up/, 'saying so');
  const specs = (artifacts.weightSpecs ?? []).filter(s => s.group === 'optimizer');
  t.equal(specs.length, 9, "adam's iterations, and m and v of 4 weights");
  const vBytes = 4 * 3; // the last optimizer weight: v of the last bias [3]
  const last2 = vBytes + 4 * 8 * 3; // and v of the last kernel [8, 3] before it
  const short = changed(file, 'short', (w, bytes) => (w.splice(-2), bytes.subarray(0, bytes.length - last2)));
  await t.rejects(train({ ...base, model: short }), {
    code: 'BAD_MODEL',
    message: new RegExp(
      `model ${short}: its optimizer's state \\(the weights of group 'optimizer'\\): it holds 6 state arrays after ` +
        "its iterations, and adam keeps 2 \\(m, v\\) for each of the model's 4 trainable weights: 8; save the model " +
        'without includeOptimizer, or give optimizer \\(--optimizer\\) to start one afresh$',
    ),
  });
  const odd = changed(file, 'odd', (w, bytes) => (w.pop(), bytes.subarray(0, bytes.length - vBytes)));
  await t.rejects(resolveConfig({ ...base, model: odd }), {
    code: 'BAD_MODEL',
    message: /it holds 7 state arrays after its iterations, which adam's 2 slots \(m, v\), .* do not divide/,
  });
  const bool = changed(file, 'bool', (w, bytes) => {
    w[w.length - 1] = { ...w[w.length - 1], dtype: 'bool', shape: [12] }; // the same 12 bytes
    return bytes;
  });
  await t.rejects(resolveConfig({ ...base, model: bool }), {
    code: 'BAD_MODEL',
    message: /optimizer weight 12 \(".*"\) is bool: tfjs saves an optimizer's state as float32/,
  });
  const notIter = changed(file, 'not-iter', (w, bytes) => {
    const first = w.findIndex(s => s.group === 'optimizer');
    w[first] = { ...w[first], dtype: 'float32', shape: [1] };
    return bytes;
  });
  await t.rejects(resolveConfig({ ...base, model: notIter }), {
    code: 'BAD_MODEL',
    message: /its first weight, .*, is not the iterations: a whole number >= 0 of shape \[\]/,
  });
  const nan = changed(file, 'nan', (_, bytes) => {
    const copy = bytes.slice();
    new DataView(copy.buffer).setFloat32(copy.length - vBytes, NaN, true);
    return copy;
  });
  await t.rejects(train({ ...base, model: nan }), { code: 'BAD_MODEL', message: /holds NaN at element 0/ });
  // tfjs's momentum at 0 saves an accumulator that tandem's plain sgd keeps no slot for: the run goes on without it
  const plain = make(tf.train.momentum(0.1, 0), 7);
  plain.compile({ optimizer: plain.optimizer, loss: 'sparseCategoricalCrossentropy' });
  await plain.fit(x, sparse, once);
  const zero = await saveWithOptimizer(plain, dir, 'momentum-0');
  const zeroRun = await train({ ...base, model: zero.file });
  t.equal(zeroRun.config.optimizer.stepsBefore, N / BATCH, 'momentum 0: the saved iterations, and no slot');
  const zeroReference = await tf.loadLayersModel(tf.io.fromMemory(zero.artifacts));
  await zeroReference.fit(x, sparse, once);
  const zeroFar = Math.max(
    ...zeroReference.trainableWeights.map((v, i) =>
      Array.from(v.read().dataSync()).reduce(
        (m, value, k) => Math.max(m, Math.abs(value - zeroRun.weights[i].values[k])),
        0,
      ),
    ),
  );
  t.ok(zeroFar <= 1e-5, `and trains as tf.loadLayersModel and model.fit: within ${zeroFar.toExponential(2)}`);
  plain.dispose();
  zeroReference.dispose();
  reference.dispose();
  saved.dispose();
  sparse.dispose();
});

t.test("a callback's new learning rate: a warning within fit, and the next call trains with it", async t => {
  const warnings: string[] = [];
  const warn = console.warn;
  console.warn = (...args: unknown[]) => void warnings.push(args.join(' '));
  t.teardown(() => void (console.warn = warn));
  const setRate = (m: tf.LayersModel, rate: number) =>
    void ((m.optimizer as unknown as { learningRate: number }).learningRate = rate);
  const model = make(tf.train.adam(0.02));
  const reference = make(tf.train.adam(0.02));
  reference.setWeights(model.getWeights());
  const halve = { onEpochEnd: async () => setRate(model, 0.01) };
  await fit(model, x, y, { ...once, epochs: 3, callbacks: halve, devices: 2, backend: 'cpu' });
  t.equal(warnings.length, 1, 'one warning in a fit of 3 epochs');
  t.equal(
    warnings[0],
    "fit: the optimizer's learning rate changed from 0.02 to 0.01 during fit (a callback?); the devices train with " +
      '0.02 to the end of this fit, and the next fit call takes the new rate. To change it within a fit, give the ' +
      'schedule as lrSchedule: (step, epoch) => rate',
  );
  warnings.length = 0;
  await reference.fit(x, y, { ...once, epochs: 3 }); // tandem's 3 epochs at 0.02
  setRate(reference, 0.01);
  // set at the fit's last epoch end: for the next call, as in tfjs (no warning)
  const lastEpoch = { onEpochEnd: async () => setRate(model, 0.005) };
  await fit(model, x, y, { ...once, callbacks: lastEpoch, devices: 2, backend: 'cpu' });
  await reference.fit(x, y, once);
  t.same(warnings, [], 'no warning for a rate set at the last epoch end');
  const w = worstWeightDifference(reference, model);
  t.ok(w <= 1e-5, `the next call trained with the new rate, as model.fit: weights within ${w.toExponential(2)}`);
  model.dispose();
  reference.dispose();
});
