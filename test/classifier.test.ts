// Method B (local-head) and Partial FC against single-engine references,
// what crosses the collectives, the dedicated loaders, and the export.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, resolveConfig, fileModelHandler, type TrainConfig } from '../src/index.js';
import { LabelPartition } from '../src/classifier/label-partition.js';
import { initialHeadWeights } from '../src/classifier/classifier-head.js';
import { ownedSamples } from '../src/methods/method-loaders.js';
import { LocalLabelSampler } from '../src/data/local-label-sampler.js';
import { GlobalBatchSampler } from '../src/data/sampler.js';
import { ShardLoader } from '../src/data/shard-loader.js';
import { allocateInputBuffers, inputSlotIndex } from '../src/data/input-slots.js';
import { resolveDataset } from '../src/data/resolve-dataset.js';
import { labelsOf, sampleSize } from '../src/data/dataset.js';
import { buildModel } from '../src/model/resolve-model.js';
import { startBackend } from '../src/engine/backend.js';
import { tfjsOptimizer } from '../src/optim/tfjs-optimizer.js';

const base: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  classes: 12,
  datasetSize: 600,
  heldOut: 120,
  embedding: 8,
  batch: 24,
  steps: 5,
  backend: 'cpu',
  seed: 4,
  optimizer: 'sgd',
  lr: 0.1,
  momentum: 0.9,
};

/** One engine: extractor + one softmax head over all classes, tfjs's optimizer, the given batches. */
async function reference(cfg: TrainConfig, batches: (step: number) => Int32Array) {
  const r = await resolveConfig(cfg);
  await startBackend(tf, 'cpu');
  const model = await buildModel(tf, r.model);
  const ds = await resolveDataset(r.data);
  const E = r.classifier!.embedding,
    C = r.classes;
  const w = tf.variable(
    tf.tensor(
      initialHeadWeights(
        r.seed,
        Int32Array.from({ length: C }, (_, i) => i),
        E,
        C,
      ),
      [E, C],
    ),
  );
  const b = tf.variable(tf.zeros([C]));
  const opt = tfjsOptimizer(tf, r.optimizer);
  const per = sampleSize(r.sampleShape);
  const vars = [...model.trainableWeights.map(v => v.read() as tf.Variable), w, b];
  const losses: number[] = [];
  for (let step = 1; step <= r.steps; step++) {
    const idx = batches(step);
    const x = new Float32Array(idx.length * per),
      y = new Int32Array(idx.length);
    idx.forEach((index, i) => {
      y[i] = ds.read(index, x, i * per);
    });
    const loss = opt.minimize(
      () =>
        tf.losses.softmaxCrossEntropy(
          tf.oneHot(tf.tensor1d(y, 'int32'), C),
          tf.add(tf.matMul(model.apply(tf.tensor(x, [idx.length, ...r.sampleShape])) as tf.Tensor2D, w), b),
        ) as tf.Scalar,
      true,
      vars,
    )!;
    losses.push(loss.dataSync()[0]);
    loss.dispose();
  }
  const weights = model.trainableWeights.map(v => v.read().dataSync().slice() as Float32Array);
  tf.dispose([w, b]);
  model.dispose();
  return { weights, losses };
}

function maxDiff(a: Float32Array[], b: { values: Float32Array }[]): number {
  let m = 0;
  a.forEach((w, i) =>
    w.forEach((v, j) => {
      m = Math.max(m, Math.abs(v - b[i].values[j]));
    }),
  );
  return m;
}

t.test('N = 1: local-head and partial-fc equal plain single-device softmax training', async t => {
  const r = await resolveConfig({ ...base, method: 'local-head', devices: 1 });
  const all = Int32Array.from({ length: r.trainSize }, (_, i) => i);
  const local = new LocalLabelSampler([all], r.perDevice, r.seed);
  const refLocal = await reference({ ...base, method: 'local-head', devices: 1 }, s => local.shardIndices(s, 0));
  const runLocal = await train({ ...base, method: 'local-head', devices: 1 });
  t.ok(
    maxDiff(refLocal.weights, runLocal.weights) < 1e-5,
    `local-head: max |diff| ${maxDiff(refLocal.weights, runLocal.weights).toExponential(2)}`,
  );
  const global = new GlobalBatchSampler(r.trainSize, r.batch, r.seed, 1);
  const refPfc = await reference({ ...base, method: 'partial-fc', devices: 1 }, s => global.shardIndices(s, 0));
  const runPfc = await train({ ...base, method: 'partial-fc', devices: 1 });
  t.ok(
    maxDiff(refPfc.weights, runPfc.weights) < 1e-5,
    `partial-fc: max |diff| ${maxDiff(refPfc.weights, runPfc.weights).toExponential(2)}`,
  );
  t.ok(Math.abs(runPfc.history[0].loss - refPfc.losses[0]) < 1e-5, 'partial-fc: same first loss');
});

for (const opt of [
  { optimizer: 'adagrad', lr: 0.05, momentum: undefined },
  { optimizer: 'rmsprop', lr: 0.01, momentum: 0.5 },
] as TrainConfig[]) {
  t.test(
    `N = 1, ${opt.optimizer}: the local head's update equals tfjs's ` +
      `optimizer${opt.optimizer === 'adagrad' ? ' (its accumulator from 0.1)' : ''}`,
    async t => {
      const cfg: TrainConfig = { ...base, ...opt, method: 'local-head', devices: 1 };
      const r = await resolveConfig(cfg);
      const local = new LocalLabelSampler([Int32Array.from({ length: r.trainSize }, (_, i) => i)], r.perDevice, r.seed);
      const ref = await reference(cfg, s => local.shardIndices(s, 0));
      const run = await train(cfg);
      const diff = maxDiff(ref.weights, run.weights);
      t.ok(diff < 1e-5, `max |diff| ${diff.toExponential(2)} < 1e-5`);
    },
  );
}

t.test(
  'partial-fc, sample rate 1, 2 and 3 devices: the loss and gradients of a full softmax in one engine',
  async t => {
    for (const devices of [2, 3]) {
      const cfg: TrainConfig = { ...base, method: 'partial-fc', devices, steps: 1, momentum: 0 };
      const r = await resolveConfig(cfg);
      const global = new GlobalBatchSampler(r.trainSize, r.batch, r.seed, devices);
      const ref = await reference(cfg, s => global.batchIndices(s));
      let identical = true;
      const run = await train(cfg, {
        onStepApplied: (_s, replicas) => {
          for (const rep of replicas) if (!rep.every((v, i) => v === replicas[0][i])) identical = false;
        },
      });
      t.ok(
        Math.abs(run.history[0].loss - ref.losses[0]) < 1e-5,
        `${devices} devices: loss ${run.history[0].loss.toFixed(6)} = ${ref.losses[0].toFixed(6)}`,
      );
      // One plain SGD step: parameters after it are init - lr * gradient, so equal parameters mean equal gradients.
      t.ok(
        maxDiff(ref.weights, run.weights) < 1e-6,
        `${devices} devices: extractor gradient equal (max |diff| ` +
          `${maxDiff(ref.weights, run.weights).toExponential(2)})`,
      );
      t.ok(identical, 'extractor replicas identical');
    }
  },
);

t.test(
  'local-head on 2 devices: heads never enter a collective, extractors identical after every step, export round-trips',
  async t => {
    const out = mkdtempSync(path.join(os.tmpdir(), 'tandem-b-'));
    let checks = 0,
      mismatches = 0;
    const run = await train(
      { ...base, method: 'local-head', devices: 2, steps: 6, out, exportClassifier: true },
      {
        onStepApplied: (_s, replicas) => {
          checks++;
          for (const rep of replicas) if (!rep.every((v, i) => v === replicas[0][i])) mismatches++;
        },
      },
    );
    const cl = run.classifier!;
    t.equal(checks, 6);
    t.equal(mismatches, 0, 'extractor parameters identical on all devices after every step');
    t.same(cl.localClasses, [6, 6], 'each device holds 1/N of the classes');
    t.same(
      cl.classifierBytesPerDevice,
      [(8 * 6 + 6) * 4, (8 * 6 + 6) * 4],
      'classifier bytes per device: its own share only',
    );
    const extractorNames = run.weights.map(w => w.name).sort();
    t.same([...cl.carriedVariables].sort(), extractorNames, 'the collectives carried exactly the extractor variables');
    t.notOk(
      cl.carriedVariables.some(n => n.startsWith('head')),
      'no head variable ever carried',
    );
    const extractorBytes = run.weights.reduce((s, w) => s + w.values.length * 4, 0);
    t.equal(cl.exchangedBytesPerStep, extractorBytes, 'bytes exchanged per step = extractor bytes');
    t.ok(cl.heldOut && cl.heldOut.samples === 120, 'held-out evaluation ran');
    // The exported extractor gives the trained extractor's embeddings.
    await tf.setBackend('cpu');
    const loaded = await tf.loadLayersModel(fileModelHandler(path.join(out, 'model.json')));
    const r = await resolveConfig({ ...base, method: 'local-head', devices: 2 });
    const rebuilt = await buildModel(tf, r.model);
    rebuilt.trainableWeights.forEach((w, i) => w.write(tf.tensor(run.weights[i].values, run.weights[i].shape)));
    const x = tf.randomUniform([5, 6, 6, 1], 0, 1, 'float32', 9);
    const a = (loaded.predict(x) as tf.Tensor).dataSync(),
      b = (rebuilt.predict(x) as tf.Tensor).dataSync();
    t.ok(
      a.every((v, i) => Math.abs(v - b[i]) < 1e-6),
      'exported extractor = trained extractor on the same inputs',
    );
    const classifier = await tf.loadLayersModel(fileModelHandler(path.join(out, 'classifier', 'model.json')));
    t.same((classifier.predict(x) as tf.Tensor).shape, [5, 12], 'the full classifier covers all C classes');
  },
);

t.test('dedicated loaders: each device reads only its labels, every training sample once per epoch', async t => {
  const r = await resolveConfig({ ...base, method: 'local-head', devices: 3, batch: 24 });
  const ds = await resolveDataset(r.data);
  const partition = LabelPartition.fromShares(r.classes, r.classifier!.partition);
  const labels = labelsOf(ds, r.trainSize, r.data.source);
  const { owned, labelMaps } = ownedSamples(partition, labels);
  t.equal(
    owned.reduce((s, o) => s + o.length, 0),
    r.trainSize,
    'every training sample belongs to exactly one device',
  );
  const sampler = new LocalLabelSampler(owned, r.perDevice, r.seed);
  for (let d = 0; d < 3; d++) {
    const seen = new Map<number, number>();
    const steps = Math.floor(owned[d].length / r.perDevice);
    for (let s = 1; s <= steps; s++) for (const i of sampler.shardIndices(s, d)) seen.set(i, (seen.get(i) ?? 0) + 1);
    t.ok(
      [...seen.values()].every(c => c === 1),
      `device ${d}: no sample twice within its epoch`,
    );
    t.ok(
      [...seen.keys()].every(i => partition.owner[labels[i]] === d),
      `device ${d}: only its own labels`,
    );
    t.ok(
      seen.size > owned[d].length - r.perDevice,
      `device ${d}: covers its share (${seen.size} of ${owned[d].length})`,
    );
  }
  // Through the real piscina loaders: labels arrive as local indices of owned classes.
  const input = allocateInputBuffers(3, r.perDevice, sampleSize(r.sampleShape));
  const loader = new ShardLoader(r.data, input, sampler, 3, { threads: 1, poolPerDevice: true, labelMaps });
  await loader.fill(1);
  await loader.close();
  for (let d = 0; d < 3; d++) {
    const at = inputSlotIndex(d, 1) * input.labelSlotSize;
    const local = new Int32Array(input.labels, at * 4, r.perDevice);
    const expected = sampler.shardIndices(1, d);
    t.same(
      Array.from(local),
      Array.from(expected, i => partition.localIndex[labels[i]]),
      `device ${d}: loader wrote local labels of owned classes`,
    );
  }
});
