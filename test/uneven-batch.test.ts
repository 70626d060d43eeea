// A batch that is no multiple of the devices: with partialBatch (fit and fitDataset set it) every batch is split as
// evenly as it can be (16 on 3 devices: 5 + 5 + 6), each device's mean loss weighted by devices · n_d / batch, so a
// step is one engine's step on the whole batch.
// - fit and fitDataset against model.fit and model.fitDataset (cpu, shuffle: false): History relative 1e-4, weights
//   1e-4; a dense classifier, BatchNormalization (sync: the global batch's statistics), a conv net on 4 devices whose
//   epochs also end in a smaller batch;
// - train on the native backend (cpu without the addon): 3 devices against the one-engine reference loop, replicas
//   bit-identical after every step, and the step replayed with the same bits as unreplayed (its weight is the
//   recording's, and a partial batch of a full one's rows runs live), in fp32 and, where oneDNN has bf16 kernels
//   here, bf16; a resume across them exact; 2 hosts × 2 devices equal to one process of 4, host 0's world loss of
//   each step included;
// - without partialBatch the batch is refused, naming partialBatch.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { fit, fitDataset, train, trainReference, type TrainConfig } from '../src/index.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { FIT_CASES, assertSameTraining, twin } from './fixtures/fit-models.js';
import { worstDifference } from './fixtures/weights-difference.js';
import { killAllTandems, summaryOf, tandem } from './fixtures/tandem-lines.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';

const addon = loadNativeAddon();
const BACKEND = addon.loaded ? 'native' : 'cpu';

await tf.setBackend('cpu');

const SHAPES = [
  { caseIndex: 0, samples: 48, batchSize: 16, devices: 3 }, // 3 batches of 5 + 5 + 6
  { caseIndex: 2, samples: 48, batchSize: 16, devices: 3 }, // BatchNormalization over the 16 rows
  { caseIndex: 1, samples: 45, batchSize: 10, devices: 4 }, // 2 + 3 + 2 + 3, then a last batch of 5: 1 + 1 + 1 + 2
];

for (const shape of SHAPES) {
  const c = FIT_CASES[shape.caseIndex];
  t.test(`${c.name}: batch ${shape.batchSize} on ${shape.devices} devices equals model.fit`, async t => {
    const data = c.data();
    const x = data.x.slice(0, shape.samples),
      y = data.y.slice(0, shape.samples);
    tf.dispose([data.x, data.y]);
    const reference = c.make();
    const model = twin(reference, c.make);
    const args = { epochs: 2, batchSize: shape.batchSize, shuffle: false, verbose: 0 as const };
    const sizes: number[] = [];
    const callbacks = { onBatchEnd: async (_b: number, logs?: tf.Logs) => void sizes.push(logs?.size as number) };
    const expected = await reference.fit(x, y, { ...args, callbacks });
    const expectedSizes = sizes.splice(0);
    const got = await fit(model, x, y, { ...args, callbacks, devices: shape.devices, backend: 'cpu' });
    t.same(sizes, expectedSizes, `the batches and their sizes, as model.fit's (${expectedSizes.join(', ')})`);
    assertSameTraining(t, [expected, reference], [got, model]);
    tf.dispose([x, y]);
    reference.dispose();
    model.dispose();
  });
}

t.test('fitDataset: batches of 16 on 3 devices equal model.fitDataset', async t => {
  const c = FIT_CASES[0];
  const { x, y } = c.data();
  const rows = (v: tf.Tensor) => tf.data.array(v.slice(0, 48).unstack());
  const dataset = () =>
    tf.data.zip({ xs: rows(x), ys: rows(y) }).batch(16) as unknown as tf.data.Dataset<{ xs: tf.Tensor; ys: tf.Tensor }>;
  const reference = c.make();
  const model = twin(reference, c.make);
  const expected = await reference.fitDataset(dataset(), { epochs: 2, verbose: 0 });
  const got = await fitDataset(model, dataset(), { epochs: 2, verbose: 0, devices: 3, backend: 'cpu' });
  assertSameTraining(t, [expected, reference], [got, model]);
  tf.dispose([x, y]);
  reference.dispose();
  model.dispose();
});

const base: TrainConfig = {
  ...{ model: 'alexnet-mini', data: 'synthetic-images', imageSize: [12, 12, 1], classes: 5, datasetSize: 240 },
  ...{ batch: 16, steps: 6, backend: BACKEND, seed: 3, optimizer: 'sgd', lr: 0.05, momentum: 0.9 },
};

t.test(`${BACKEND}: 3 devices on batches of 16 equal the one-engine reference, replicas identical`, async t => {
  const ref = await trainReference(base);
  let checks = 0,
    mismatches = 0;
  const run = await train(
    { ...base, devices: 3, partialBatch: true },
    {
      onStepApplied(_step, replicas) {
        checks++;
        for (const r of replicas) if (!r.every((v, i) => v === replicas[0][i])) mismatches++;
      },
    },
  );
  const diff = worstDifference(run.weights, ref.weights);
  t.ok(diff < 2e-5, `max |param - reference| = ${diff.toExponential(2)} < 2e-5`);
  t.equal(checks, base.steps, 'replicas checked after every step');
  t.equal(mismatches, 0, 'all replicas bit-identical after every step');
  t.ok(Math.abs(run.history[0].loss - ref.losses[0]) < 1e-4, 'first-step loss equals the reference loss');
});

const bf16 = addon.loaded && addon.addon.bf16Support().implementation !== '';
for (const precision of ['fp32', 'bf16'] as const) {
  t.test(
    `native ${precision}: uneven shares replay, with the bits of unreplayed steps`,
    { skip: !addon.loaded ? 'no native addon' : precision === 'bf16' && !bf16 ? 'no bf16 kernel here' : false },
    async t => {
      const once = async (replay: 'on' | 'off') => {
        process.env.TANDEM_STEP_REPLAY = replay;
        try {
          // 207 samples in batches of 16 on 3 devices: 12 full batches (5 + 5 + 6), then 15 (5 + 5 + 5): devices 0
          // and 1 have a full batch's rows in it, but the weight 1 where a full batch has 15/16
          const cfg = { ...base, devices: 3, partialBatch: true, datasetSize: 207, steps: 14, precision };
          const s = await train(cfg);
          return { history: s.history.map(h => ({ ...h })), checksum: s.replicaChecksum, replayed: s.replayedSteps };
        } finally {
          delete process.env.TANDEM_STEP_REPLAY;
        }
      };
      const on = await once('on');
      const off = await once('off');
      t.equal(off.replayed, 0, 'off: no step replayed');
      // the first two record; the 13th (a partial batch) runs live; the 14th replays again
      t.equal(on.replayed, 14 - 2 - 1, 'on: every full batch after the two recorded replays');
      t.same(on.history, off.history, 'every step: the same loss and accuracy bits');
      t.equal(on.checksum, off.checksum, 'the same replica bits');
    },
  );
}

t.test(`${BACKEND}: resume is exact across uneven shares and an epoch's partial batch`, async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-uneven-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // 56 samples in batches of 16 on 3 devices: 5 + 5 + 6 three times, then 8 as 2 + 3 + 3; the checkpoint at step 3
  const cfg = { ...base, devices: 3, partialBatch: true, datasetSize: 70, heldOut: 14, steps: 6 };
  const full = await train({ ...cfg, checkpointEvery: 3, checkpointDir: dir });
  const rates: number[] = [];
  const resumed = await train(
    { ...cfg, resume: path.join(dir, 'checkpoint-000000003.tandem') },
    { onStep: m => void rates.push((m.samplesPerSecond * m.stepMs) / 1000) },
  );
  const [partial, ...full16] = rates;
  t.ok(Math.abs(partial - 8) < 1e-6 && full16.every(r => Math.abs(r - 16) < 1e-6), "steps' samples/s: 8, then 16s");
  t.equal(resumed.firstStep, 4, 'continues at step 4');
  const bits = (ws: { values: Float32Array }[]) => ws.map(w => Array.from(new Uint32Array(w.values.slice().buffer)));
  t.same(bits(resumed.weights), bits(full.weights), '3 + 3 steps = 6 uninterrupted steps, bit for bit');
  t.same(
    resumed.history.map(h => h.loss),
    full.history.slice(3).map(h => h.loss),
    'the same losses after it',
  );
});

const hosts = glooAddonOrSkip(); // several hosts meet through Gloo's store
t.test(
  "2 hosts × 2 devices on batches of 9 equal one process of 4: weights, replicas, every step's loss",
  { skip: !hosts },
  async t => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-uneven-hosts-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    t.teardown(killAllTandems);
    // 60 samples in batches of 9: 2 + 2 + 2 + 3, then an epoch's last batch of 6 (1 + 2 + 1 + 2)
    const args = ['--model', 'mlp', '--data', 'synthetic-images', '--image-size', '6x6x1', '--classes', '4'];
    args.push('--dataset-size', '60', '--batch', '9', '--partial-batch', '--steps', '8', '--seed', '5', '--json');
    const launch = tandem(['launch', '--hosts', '2', '--devices', '2', ...args, '--out', path.join(dir, 'hosts')]);
    const one = tandem(['train', '--devices', '4', ...args, '--out', path.join(dir, 'one')]);
    const [h, o] = await Promise.all([launch.ended, one.ended]);
    t.equal(h.code, 0, `launch: ${launch.stderr.join('\n')}`);
    t.equal(o.code, 0, `one process: ${one.stderr.join('\n')}`);
    const file = (run: string, name: string) => readFileSync(path.join(dir, run, name));
    t.ok(file('hosts', 'weights.bin').equals(file('one', 'weights.bin')), 'weights.bin bit-identical');
    const [host0, host1] = [summaryOf(launch.lines, '[host 0] '), summaryOf(launch.lines, '[host 1] ')];
    const oneSummary = summaryOf(one.lines);
    t.equal(host0.replicaChecksum, oneSummary.replicaChecksum, "host 0's replica = one process's");
    t.equal(host1.replicaChecksum, oneSummary.replicaChecksum, "host 1's replica = one process's");
    const losses = (run: string) =>
      (JSON.parse(file(run, 'summary.json').toString()) as { history: { loss: number }[] }).history.map(s => s.loss);
    const [world, local] = [losses('hosts'), losses('one')];
    const worst = Math.max(...world.map((l, i) => Math.abs(l - local[i]) / Math.abs(local[i])));
    t.ok(
      world.length === 8 && worst < 1e-6,
      `host 0's world loss of every step = one process's (${worst.toExponential(2)})`,
    );
  },
);

t.test('a batch smaller than the devices is refused: every device has a sample of each full batch', async t => {
  await t.rejects(train({ ...base, batch: 2, devices: 3, partialBatch: true }), {
    code: 'BAD_CONFIG',
    message: /config\.batch: global batch 2 is smaller than devices 3; give a batch of at least 3/,
  });
  const { x, y } = FIT_CASES[0].data();
  await t.rejects(fit(FIT_CASES[0].make(), x, y, { batchSize: 2, devices: 3, backend: 'cpu' }), {
    code: 'BAD_CONFIG',
    message: /fit: batchSize 2 is smaller than the devices \(3\).*give a batchSize of at least 3, or train on fewer/,
  });
  const batchesOf2 = tf.data.zip({ xs: tf.data.array(x.unstack()), ys: tf.data.array(y.unstack()) }).batch(2);
  await t.rejects(fitDataset(FIT_CASES[0].make(), batchesOf2 as never, { epochs: 1, devices: 3, backend: 'cpu' }), {
    code: 'BAD_CONFIG',
    message: /fitDataset: the dataset's batches of 2 are smaller than the devices \(3\).*batch it by 3 or more/,
  });
  tf.dispose([x, y]);
});

t.test('without partialBatch, a batch that is no multiple of the devices is refused, naming it', async t => {
  await t.rejects(train({ ...base, devices: 3 }), {
    code: 'BAD_CONFIG',
    message: /config\.batch: global batch 16 must be divisible by devices 3 .*try 15, or set partialBatch/,
  });
});
