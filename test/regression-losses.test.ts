// The regression losses tfjs offers besides mse (mae, huber, logcosh, msle, mape, poisson) train as mse does: a
// model.json compiled with each trains with it (no `loss` given) on 2 devices (3 for mae) as one tfjs engine does on
// the global batch (trainReference, loss given) and as tfjs's own model.fit compiled with that loss does; each loss's
// value, averaged over the devices' shards, is tfjs-layers'
// own on the global batch (model.evaluate; huber: tf.losses.huberLoss); a loss tandem does not train is refused with
// the list of those it does, and a regression loss on class labels is refused.
import t from 'tap';
import { fileURLToPath } from 'node:url';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { train, trainReference, resolveConfig, type TrainConfig } from '../src/index.js';
import { buildModel } from '../src/model/resolve-model.js';
import { outputLoss } from '../src/model/output-loss.js';
import { LOSS_KINDS, type RegressionLossKind } from '../src/model/loss-kinds.js';
import { worstDifference } from './fixtures/weights-difference.js';
import { fitReference } from './fixtures/fit-reference.js';

const backend = process.env.TANDEM_BACKEND as TrainConfig['backend'] | undefined;
const base: TrainConfig = {
  model: fileURLToPath(new URL('../../test/fixtures/models/positive-regressor.mjs', import.meta.url)),
  data: fileURLToPath(new URL('../../test/fixtures/positive-regression.mjs', import.meta.url)),
  batch: 12,
  steps: 3,
  optimizer: 'sgd',
  lr: 0.05,
  momentum: 0,
  seed: 11,
  backend,
};

/**
 * Each new loss: a name a model.json may carry for it, tfjs-layers' own (its lossesMap key; huber: none, tfjs-core's
 * tf.losses.huberLoss instead), the devices, and an lr that moves the weights without diverging.
 */
const cases: {
  kind: Exclude<RegressionLossKind, 'mse'>;
  saved: string;
  layers?: string;
  devices: number;
  lr: number;
}[] = [
  { kind: 'mae', saved: 'meanAbsoluteError', layers: 'meanAbsoluteError', devices: 3, lr: 0.05 },
  { kind: 'huber', saved: 'huber_loss', devices: 2, lr: 0.05 },
  { kind: 'logcosh', saved: 'logcosh', layers: 'logcosh', devices: 2, lr: 0.05 },
  { kind: 'msle', saved: 'mean_squared_logarithmic_error', layers: 'meanSquaredLogarithmicError', devices: 2, lr: 0.2 },
  { kind: 'mape', saved: 'MAPE', layers: 'meanAbsolutePercentageError', devices: 2, lr: 0.001 },
  { kind: 'poisson', saved: 'poisson', layers: 'poisson', devices: 2, lr: 0.05 },
];

/**
 * A model.json of the positive regressor (saved from tfjs, weights beside it), and a copy of it compiled with `loss`
 * (its trainingConfig).
 */
let saved: Promise<{ json: Record<string, unknown>; dir: string }> | undefined;
async function compiledWith(loss: unknown): Promise<string> {
  saved ??= (async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-regression-'));
    const model = await buildModel(tf, (await resolveConfig({ ...base, loss: 'mse' })).model);
    let json: Record<string, unknown> = {};
    await model.save(
      tf.io.withSaveHandler(async a => {
        writeFileSync(path.join(dir, 'weights.bin'), new Uint8Array(a.weightData as ArrayBuffer));
        json = {
          format: 'layers-model',
          modelTopology: a.modelTopology,
          weightsManifest: [{ paths: ['weights.bin'], weights: a.weightSpecs }],
        };
        return { modelArtifactsInfo: { dateSaved: new Date(), modelTopologyType: 'JSON' } };
      }),
    );
    model.dispose();
    return { json, dir };
  })();
  const { json, dir } = await saved;
  const file = path.join(dir, `compiled-${JSON.stringify(loss).replace(/\W/g, '')}.json`);
  writeFileSync(
    file,
    JSON.stringify({ ...json, trainingConfig: { loss, optimizer_config: { class_name: 'SGD', config: {} } } }),
  ); // weights beside it
  return file;
}

for (const c of cases) {
  t.test(
    `${c.kind}: a model.json compiled with ${c.saved} trains with it; ${c.devices} devices = one engine on the ` +
      `global batch`,
    async t => {
      const cfg: TrainConfig = { ...base, model: await compiledWith(c.saved), lr: c.lr };
      t.equal((await resolveConfig(cfg)).loss, c.kind, `${c.saved} read from trainingConfig as ${c.kind}`);
      const ref = await trainReference({ ...cfg, loss: c.kind });
      const run = await train({ ...cfg, devices: c.devices });
      const worst = worstDifference(run.weights, ref.weights);
      t.ok(worst < 1e-5, `max |param - one engine| = ${worst.toExponential(2)} < 1e-5`);
      const initial = await initialWeights(cfg);
      const moved = worstDifference(ref.weights, initial);
      t.ok(
        moved > 1e-3,
        `the parameters moved ${moved.toExponential(2)}, >100x the tolerance: the comparison can tell`,
      );
      t.ok(
        Math.abs(run.history[0].loss - ref.losses[0]) < 1e-5 * Math.max(1, Math.abs(ref.losses[0])),
        `step 1's loss: ${run.history[0].loss.toFixed(6)} on the devices, ${ref.losses[0].toFixed(6)} on one engine`,
      );
      t.ok(Number.isNaN(run.finalAccuracy), 'no accuracy for a regression');
      const fit = worstDifference(
        run.weights,
        await fitReference(cfg, c.layers ?? ((yt: tf.Tensor, yp: tf.Tensor) => tf.losses.huberLoss(yt, yp))),
      );
      t.ok(
        fit < 1e-5,
        `max |param - tfjs's model.fit with ${c.layers ?? 'tf.losses.huberLoss'}| = ${fit.toExponential(2)} < 1e-5`,
      );
    },
  );
}

/** The weights the model starts from (its model.json's), as the runs read them. */
async function initialWeights(cfg: TrainConfig) {
  const resolved = await resolveConfig(cfg);
  const model = await buildModel(tf, resolved.model);
  const weights = model.trainableWeights.map(w => ({
    name: w.originalName,
    shape: [...w.shape] as number[],
    values: w.read().dataSync() as Float32Array,
  }));
  model.dispose();
  return weights;
}

// A fixed output/target pair (positive outputs, as poisson needs; errors above and below huber's delta 1).
const outputs = [0.3, 1.2, 2.5, 0.05, 0.9, 3.1, 1.7, 0.4, 2.2, 0.6, 1.1, 0.8];
const targets = [0.5, 1.0, 0.2, 1.5, 2.9, 0.7, 1.7, 3.8, 0.25, 0.6, 1.4, 0.05];

/** tandem's loss: each of `devices` devices' mean over its shard, averaged over the devices. */
function tandemLoss(kind: RegressionLossKind, devices: number): number {
  const per = outputs.length / devices;
  let sum = 0;
  for (let d = 0; d < devices; d++) {
    const shard = (a: number[]) => a.slice(d * per, (d + 1) * per);
    sum += tf.tidy(
      () =>
        outputLoss(
          tf,
          tf.tensor2d(shard(outputs), [per, 1]),
          tf.tensor1d(shard(targets)),
          { kind, fromProbabilities: false },
          1,
        ).loss.dataSync()[0],
    );
  }
  return sum / devices;
}

/**
 * tfjs's loss on the global batch: tfjs-layers' own loss function (model.evaluate of an identity model compiled with
 * it); huber: tfjs-core's.
 */
function tfjsLoss(name: string | undefined): number {
  const y = tf.tensor2d(targets, [targets.length, 1]),
    p = tf.tensor2d(outputs, [outputs.length, 1]);
  if (name === undefined) return tf.tidy(() => tf.losses.huberLoss(y, p).dataSync()[0]);
  const identity = tf.sequential({
    layers: [tf.layers.dense({ inputShape: [1], units: 1, useBias: false, kernelInitializer: 'ones' })],
  });
  identity.compile({ optimizer: 'sgd', loss: name });
  const loss = identity.evaluate(p, y, { batchSize: outputs.length }) as tf.Scalar;
  const value = loss.dataSync()[0];
  tf.dispose([loss, y, p]);
  identity.dispose();
  return value;
}

t.test(
  "each loss averaged over 2 and 3 devices' shards = tfjs-layers' own on the global batch (a fixed output/target pair)",
  async t => {
    await tf.setBackend('cpu');
    const values = new Set<number>();
    for (const c of cases) {
      const ref = tfjsLoss(c.layers);
      values.add(Math.round(ref * 1e4));
      for (const devices of [2, 3]) {
        const got = tandemLoss(c.kind, devices);
        t.ok(
          Math.abs(got - ref) < 1e-6 * Math.max(1, Math.abs(ref)),
          `${c.kind}, ${devices} devices: ${got.toFixed(6)} = tfjs ${ref.toFixed(6)}`,
        );
      }
    }
    t.equal(values.size, cases.length, 'the six losses differ on this pair: a swapped loss would be seen');
  },
);

t.test('every tfjs and keras spelling of each loss is read from a saved model.json', async t => {
  const spellings: Record<Exclude<RegressionLossKind, 'mse'>, string[]> = {
    mae: ['meanAbsoluteError', 'mean_absolute_error', 'mae', 'MAE'],
    mape: ['meanAbsolutePercentageError', 'mean_absolute_percentage_error', 'mape', 'MAPE'],
    msle: ['meanSquaredLogarithmicError', 'mean_squared_logarithmic_error', 'msle', 'MSLE'],
    logcosh: ['logcosh', 'log_cosh', 'logCosh'],
    poisson: ['poisson'],
    huber: ['huberLoss', 'huber_loss', 'huber'],
  };
  for (const [kind, names] of Object.entries(spellings)) {
    for (const name of names)
      t.equal((await resolveConfig({ ...base, model: await compiledWith(name) })).loss, kind, `${name} -> ${kind}`);
  }
});

t.test('a loss tandem does not train is refused, naming every loss it does', async t => {
  const every = new RegExp(`give loss: ${LOSS_KINDS.slice(0, -1).join(', ')} or ${LOSS_KINDS[LOSS_KINDS.length - 1]}$`);
  t.match(LOSS_KINDS.join(), /mae.*huber.*logcosh.*msle.*mape.*poisson/, 'the list holds the new ones');
  for (const name of ['cosineProximity', 'kullbackLeiblerDivergence']) {
    await t.rejects(resolveConfig({ ...base, model: await compiledWith(name) }), {
      code: 'BAD_CONFIG',
      message: new RegExp(`compiled with loss ${name}, which tandem does not train; ${every.source}`),
    });
  }
});

t.test('a regression loss on class labels (a builtin dataset) is refused, as mse is', async t => {
  for (const data of ['mnist', 'synthetic-images']) {
    for (const loss of ['mse', 'mae', 'poisson'] as const) {
      await t.rejects(
        resolveConfig({ model: 'mlp', data, loss, backend }),
        {
          code: 'BAD_CONFIG',
          message: new RegExp(`${loss} \\(regression\\) needs float targets.*'${data}' has class labels`),
        },
        `${data} with --loss ${loss}`,
      );
    }
  }
});
