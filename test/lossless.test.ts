// Lossless: N devices on the same global batches give the parameters of the
// single-engine reference loop (tfjs's own optimizers, whole batch at once),
// and every replica holds identical parameters after every step.
import t from 'tap';
import { train, trainReference, type TrainConfig } from '../src/index.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import type { BackendName } from '../src/engine/backend.js';
import { worstDifference } from './fixtures/weights-difference.js';

// The same backend on both sides, so the differences are float32 summation order only:
// TANDEM_BACKEND when set (CI's wasm pass), else native when the addon is built, else cpu.
const BACKEND: BackendName =
  (process.env.TANDEM_BACKEND as BackendName | undefined) ?? (loadNativeAddon().loaded ? 'native' : 'cpu');
t.comment(`lossless on backend ${BACKEND}`);
// Adam moves every parameter by ~lr per step whatever the gradient's size, so
// order-of-summation noise in near-zero gradients shows up larger there.
const TOLERANCE = 2e-5;
const TOLERANCE_ADAM = 1e-4;

const base = {
  data: 'synthetic-images',
  imageSize: [12, 12, 1],
  classes: 5,
  datasetSize: 240,
  batch: 12,
  steps: 3,
  backend: BACKEND,
  seed: 3,
} as const;

/** The all-reduce form on 2 and on 3 devices for the k-th (model, optimizer) pair: the two alternate, so each model and
 * each optimizer runs both forms on both 2 and 3 devices (the form does not depend on either; the suite's time).
 * One device likewise on alternate pairs (mlp sgd, alexnet-mini adam): each model and each optimizer once. */
const forms = (k: number) =>
  (k % 2 === 0 ? { 1: 'sharded', 2: 'sharded', 3: 'primary' } : { 1: 'sharded', 2: 'primary', 3: 'sharded' }) as Record<
    1 | 2 | 3,
    'sharded' | 'primary'
  >;

for (const [m, model] of ['mlp', 'alexnet-mini'].entries()) {
  for (const [o, opt] of (
    [
      { optimizer: 'sgd', lr: 0.05, momentum: 0.9 },
      { optimizer: 'adam', lr: 0.01 },
    ] as const
  ).entries()) {
    const form = forms(m + o);
    const counts = (m + o) % 2 === 0 ? ([1, 2, 3] as const) : ([2, 3] as const);
    t.test(
      `${BACKEND} ${model} ${opt.optimizer}: ${counts.length === 3 ? '1, ' : ''}2 (${form[2]}), 3 (${form[3]}) ` +
        `devices equal the reference`,
      async t => {
        const cfg: TrainConfig = { ...base, imageSize: [...base.imageSize], model, ...opt };
        const ref = await trainReference(cfg);
        t.ok(ref.losses.every(Number.isFinite), 'reference trains');
        for (const devices of counts) {
          // One device has nothing to reduce: one form there; on 2 and 3 devices the form of this pair.
          for (const allReduce of [form[devices]]) {
            let replicaChecks = 0,
              replicaMismatch = 0;
            const run = await train(
              { ...cfg, devices, allReduce },
              {
                onStepApplied(_step, replicas) {
                  replicaChecks++;
                  for (const r of replicas) if (!r.every((v, i) => v === replicas[0][i])) replicaMismatch++;
                },
              },
            );
            const diff = worstDifference(run.weights, ref.weights);
            const tol = opt.optimizer === 'adam' ? TOLERANCE_ADAM : TOLERANCE;
            t.ok(
              diff < tol,
              `${devices} device(s), ${allReduce}: max |param - reference| = ${diff.toExponential(2)} < ${tol}`,
            );
            t.equal(replicaChecks, cfg.steps, 'replicas checked after every step');
            t.equal(replicaMismatch, 0, 'all replicas bit-identical after every step');
            t.ok(Math.abs(run.history[0].loss - ref.losses[0]) < 1e-4, 'first-step loss equals the reference loss');
          }
        }
      },
    );
  }
}

t.test('the comparison can fail: a different learning rate is detected', async t => {
  const cfg: TrainConfig = { ...base, imageSize: [...base.imageSize], model: 'mlp', optimizer: 'sgd', lr: 0.05 };
  const ref = await trainReference(cfg);
  const run = await train({ ...cfg, lr: 0.051, devices: 2 });
  t.ok(worstDifference(run.weights, ref.weights) > TOLERANCE);
});
