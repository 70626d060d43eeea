// rmsprop, adagrad, adamax, adadelta and momentum (by name) in real runs of worker threads: 2 devices (3 for rmsprop)
// give what the single-engine reference (tfjs's own optimizer, the global batch) gives; a checkpoint resumes to the
// uninterrupted run's bits (the optimizer state, adagrad's accumulator and adamax's iteration counter carried);
// localUpdate 'shard' gives the bits of 'replica'.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, trainReference, type TrainConfig, type TrainSummary } from '../src/index.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { checkpointPath, readCheckpoint } from '../src/checkpoint/checkpoint-file.js';
import type { BackendName } from '../src/engine/backend.js';
import { worstDifference } from './fixtures/weights-difference.js';
import { withFault } from './fixtures/fault-plugin.js';

/** A NaN parameter is infinitely far from the reference. */
const NAN_IS_WORST = { nan: 'infinity' } as const;

// As test/lossless.test.ts: the same backend on both sides, the differences float32 summation order only; the adaptive
// optimizers (like adam) move every parameter by ~lr whatever its gradient's size: adam's tolerance.
const BACKEND: BackendName =
  (process.env.TANDEM_BACKEND as BackendName | undefined) ?? (loadNativeAddon().loaded ? 'native' : 'cpu');
const TOLERANCE = 1e-4;
const BASE = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [12, 12, 1],
  classes: 5,
  datasetSize: 240,
  batch: 12,
  steps: 3,
  backend: BACKEND,
  seed: 3,
} as const;

/** Each optimizer with hyper-parameters off their defaults where that changes the rule (adadelta at keras's lr 1). */
const OPTIMIZERS: { opt: TrainConfig; devices: number[] }[] = [
  { opt: { optimizer: 'rmsprop', lr: 0.01, momentum: 0.5, decay: 0.8 }, devices: [2, 3] },
  { opt: { optimizer: 'adagrad', lr: 0.05, initialAccumulatorValue: 0.2 }, devices: [2] },
  { opt: { optimizer: 'adamax', lr: 0.01, decay: 0.1 }, devices: [2] },
  { opt: { optimizer: 'adadelta', lr: 1, rho: 0.9 }, devices: [2] },
  { opt: { optimizer: 'momentum', lr: 0.05, momentum: 0.8 }, devices: [2] },
  { opt: { optimizer: 'momentum', lr: 0.05, momentum: 0.8, nesterov: true }, devices: [2] },
];

const bits = (s: { weights: { values: Float32Array }[] }) =>
  s.weights.map(w => Buffer.from(w.values.buffer, w.values.byteOffset, w.values.byteLength).toString('hex')).join('');

for (const { opt, devices } of OPTIMIZERS) {
  t.test(`${BACKEND} ${JSON.stringify(opt)}: ${devices.join(' and ')} devices equal the reference`, async t => {
    const cfg: TrainConfig = { ...BASE, imageSize: [...BASE.imageSize], ...opt };
    const ref = await trainReference(cfg);
    t.ok(ref.losses.every(Number.isFinite), `reference trains: losses ${ref.losses.map(l => l.toFixed(4)).join(', ')}`);
    const afterStep1 = (await trainReference({ ...cfg, steps: 1 })).weights;
    for (const n of devices) {
      const run = await train({ ...cfg, devices: n });
      const diff = worstDifference(run.weights, ref.weights, NAN_IS_WORST);
      t.ok(diff < TOLERANCE, `${n} devices: max |param - reference| = ${diff.toExponential(2)} < ${TOLERANCE}`);
      t.ok(Math.abs(run.history[0].loss - ref.losses[0]) < 1e-4, 'first-step loss equals the reference loss');
      const moved = worstDifference(run.weights, afterStep1, NAN_IS_WORST);
      t.ok(
        moved > 10 * TOLERANCE,
        `steps 2-3 moved the parameters by up to ${moved.toExponential(2)}: the comparison can tell`,
      );
    }
  });
}

for (const { opt } of OPTIMIZERS.slice(0, 4)) {
  t.test(`resume is exact: ${JSON.stringify(opt)}`, async t => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-opt-ckpt-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const cfg: TrainConfig = { ...BASE, imageSize: [6, 6, 1], devices: 2, ...opt };
    const full = await train({ ...cfg, steps: 4, checkpointEvery: 2, checkpointDir: dir });
    const again = path.join(dir, 'resumed');
    const resumed = await train({
      ...cfg,
      steps: 4,
      resume: checkpointPath(dir, 2),
      checkpointEvery: 2,
      checkpointDir: again,
    });
    t.equal(resumed.firstStep, 3, 'continues at step 3');
    t.equal(bits(resumed), bits(full), '2 + 2 steps = 4 uninterrupted steps, bit for bit');
    // tfjs's adadelta keeps its two accumulators equal (see optimizers/adadelta.ts), so its parameters cannot tell a
    // lost state: the state at step 4 itself is compared too.
    const state = async (d: string) =>
      bits({ weights: (await readCheckpoint(checkpointPath(d, 4))).optimizerState.map(values => ({ values })) });
    t.equal(await state(again), await state(dir), 'the same optimizer state at step 4, bit for bit');
    const atStep2 = (await readCheckpoint(checkpointPath(dir, 2))).params;
    t.not(
      bits({ weights: [{ values: atStep2 }] }),
      bits({ weights: [{ values: (await readCheckpoint(checkpointPath(dir, 4))).params }] }),
      'and the last 2 steps changed the parameters (the checkpoints of steps 2 and 4 differ)',
    );
  });
}

for (const [devices, opt] of [
  [3, { optimizer: 'adagrad', lr: 0.05 }],
  [2, { optimizer: 'adamax', lr: 0.01, decay: 0.1 }],
] as [number, TrainConfig][]) {
  t.test(`${devices} devices, ${opt.optimizer}: localUpdate shard = replica, bit for bit`, async t => {
    const cfg: TrainConfig = {
      model: 'alexnet-mini',
      data: 'synthetic-images',
      imageSize: [16, 16, 3],
      datasetSize: 256,
      steps: 4,
      seed: 5,
      devices,
      batch: 4 * devices,
      ...opt,
    };
    const shard: TrainSummary = await train({ ...cfg, localUpdate: 'shard', replicaCheckEvery: 1 });
    const replica = await train(cfg);
    t.equal(shard.config.localUpdate, 'shard', 'updated by shards');
    t.equal(bits(shard), bits(replica), 'the same weights, bit for bit');
    t.equal(shard.replicaChecksum, replica.replicaChecksum, 'the same replica');
  });
}

t.test(
  "centered rmsprop: tfjs's own rule goes NaN, and the run says so (the likely cause and the way out)",
  async t => {
    const cfg: TrainConfig = {
      ...BASE,
      imageSize: [...BASE.imageSize],
      optimizer: 'rmsprop',
      centered: true,
      lr: 0.01,
    };
    const ref = await trainReference(cfg);
    t.ok(
      ref.losses.slice(1).some(l => Number.isNaN(l)),
      `tfjs's tf.train.rmsprop(…, centered) on one engine: losses ${ref.losses.map(l => l.toFixed(4)).join(', ')}`,
    );
    await t.rejects(train({ ...cfg, devices: 2 }), {
      code: 'NON_FINITE',
      message:
        /the loss is not finite in step 2 .*; with rmsprop centered, the likely cause is tfjs's own rule, .*drop --centered \(centered: false\)$/,
    });
    await t.rejects(
      train({
        ...cfg,
        centered: false,
        devices: 2,
        ...withFault({ device: 1, step: 2, phase: 'forward', kind: 'nan' }),
      }),
      { code: 'NON_FINITE', message: /onNan: 'skip-step'$/ },
      'a NaN with rmsprop not centered: no such hint',
    );
  },
);
