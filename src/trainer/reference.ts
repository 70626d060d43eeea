/**
 * The single-engine reference loop: no workers, no shared memory, tfjs's own
 * optimizers, the whole global batch at once. Data-parallel training must
 * give what this gives (the lossless invariant); tests compare the two.
 */
import * as tf from '#tfjs';
import { resolveConfig } from '../config.js';
import { isRegressionLoss, type ResolvedConfig, type TrainConfig } from '../config-types.js';
import { engineStartOptions, startBackend } from '../engine/backend.js';
import { getEngine } from '../engine/engine-registry.js';
import { TandemError } from '../errors.js';
import { buildTrainingModel } from '../model/resolve-model.js';
import { assignWeight } from '../model/flat-weights.js';
import { outputLoss, outputLossOf, withRegularization } from '../model/output-loss.js';
import { SampleReader } from '../data/one-sample-view.js';
import { resolveDataset } from '../data/resolve-dataset.js';
import { seedRandomLayers } from '../model/seeded-random-layers.js';
import { GlobalBatchSampler } from '../data/sampler.js';
import type { TrainSummary } from './train.js';
import { setTfjsLearningRate, tfjsOptimizer } from '../optim/tfjs-optimizer.js';
import { lrAt } from '../optim/lr-schedule.js';
import { seedTfjsOptimizer } from '../optim/tfjs-optimizer-state.js';
import { readSavedOptimizerState } from '../config/saved-model.js';

export interface ReferenceOptions {
  /** Values for weights of the built model, by name (e.g. the non-trainable weights a run started from). */
  initialWeights?: { name: string; values: Float32Array }[];
  /**
   * Random layers (Dropout, GaussianNoise, …) draw as a run on this many devices draws them (each device's
   * shard of the batch with its own keyed stream), instead of tfjs's unseeded draws: the reference of a
   * run with random layers.
   */
  randomLayersAsDevices?: number;
}

export async function trainReference(
  config: TrainConfig,
  options: ReferenceOptions = {},
): Promise<{
  weights: TrainSummary['weights'];
  nonTrainableWeights: TrainSummary['nonTrainableWeights'];
  losses: number[];
}> {
  const cfg = await resolveConfig(config);
  if (!getEngine(cfg.backend).capabilities.synchronousReads) {
    throw new TandemError(
      'BAD_CONFIG',
      `trainReference runs on the calling thread and reads synchronously, which backend '${cfg.backend}' cannot; ` +
        'compute the reference on a CPU engine (backend cpu, wasm or native) and compare within a tolerance',
    );
  }
  const { model, random } = await referenceModel(cfg, options);
  const spec = outputLossOf(model, cfg.classes, cfg.loss);
  const floatTargets = isRegressionLoss(cfg.loss);
  const ds = await resolveDataset(cfg.data);
  const sampler = new GlobalBatchSampler(cfg.datasetSize, cfg.batch, cfg.seed, 1, cfg.shuffle);
  const optimizer = await referenceOptimizer(cfg, model);
  const reader = new SampleReader(ds, cfg.data.source);
  const per = reader.sampleFloats;
  const x = new Float32Array(cfg.batch * per),
    y = floatTargets ? new Float32Array(cfg.batch) : new Int32Array(cfg.batch);
  const losses: number[] = [];
  const vars = model.trainableWeights.map(w => w.read() as tf.Variable);
  for (let step = 1; step <= cfg.steps; step++) {
    sampler.batchIndices(step).forEach((index, i) => {
      y[i] = reader.read(index, x, i * per);
    });
    random?.at(cfg.seed, 0, step);
    if (cfg.lrSchedule) setTfjsLearningRate(optimizer, lrAt(cfg.lrSchedule, cfg.optimizer.lr, step));
    const loss = tf.tidy(() => {
      const xs = tf.tensor(x, [cfg.batch, ...cfg.sampleShape]),
        ys = tf.tensor(y, [cfg.batch], floatTargets ? 'float32' : 'int32');
      return optimizer.minimize(() => penalisedLoss(model, xs, ys, spec, cfg.classes), true, vars) as tf.Scalar;
    });
    losses.push(loss.dataSync()[0]);
    loss.dispose();
  }
  const values = (ws: typeof model.weights) =>
    ws.map(w => ({
      name: w.originalName,
      shape: [...w.shape] as number[],
      values: w.read().dataSync() as Float32Array,
    }));
  const weights = values(model.trainableWeights),
    nonTrainableWeights = values(model.nonTrainableWeights);
  optimizer.dispose();
  model.dispose();
  return { weights, nonTrainableWeights, losses };
}

/** tfjs's optimizer of the run, from the saved state the run starts from (config/saved-model.ts), checked as there. */
async function referenceOptimizer(cfg: ResolvedConfig, model: tf.LayersModel): Promise<tf.Optimizer> {
  const optimizer = tfjsOptimizer(tf, cfg.optimizer);
  const weights = model.trainableWeights.map(w => ({ name: w.originalName, shape: w.shape as number[] }));
  const saved = await readSavedOptimizerState(cfg, weights);
  if (saved) await seedTfjsOptimizer(optimizer, saved.list);
  return optimizer;
}

/** The reference's model on the calling thread: its initial weights as given, its random layers seeded as asked. */
async function referenceModel(cfg: ResolvedConfig, options: ReferenceOptions) {
  await startBackend(tf, cfg.backend, engineStartOptions(cfg));
  const model = await buildTrainingModel(tf, cfg);
  for (const { name, values } of options.initialWeights ?? []) {
    const w = model.weights.find(v => v.originalName === name);
    if (!w) throw new Error(`trainReference: the model has no weight named ${name}`);
    tf.tidy(() => assignWeight(w, tf.tensor(values, w.shape as number[], 'float32'))); // as devices set them
  }
  const random =
    options.randomLayersAsDevices === undefined
      ? undefined
      : seedRandomLayers(tf, model, options.randomLayersAsDevices);
  return { model, random };
}

/** The loss minimized in one step: the output loss of `xs` against `ys`, with the model's penalties (as model.fit). */
function penalisedLoss(
  model: tf.LayersModel,
  xs: tf.Tensor,
  ys: tf.Tensor,
  spec: ReturnType<typeof outputLossOf>,
  classes: number,
): tf.Scalar {
  const { loss, correct } = outputLoss(tf, model.apply(xs, { training: true }) as tf.Tensor, ys, spec, classes);
  correct.dispose();
  return withRegularization(tf, model, loss) as tf.Scalar;
}
