/**
 * `fit(model, x, y, args)`: tfjs's `model.fit` on tandem's devices. The compiled model (topology, weights, optimizer)
 * and the samples go to a private directory every device thread reads (fit-files.ts); each epoch is one tandem run
 * that resumes the previous epoch's checkpoint (parameters, optimizer state, non-trainable weights), so that between
 * epochs the trained weights are in `model`, validation runs on them and tfjs's callbacks run with tfjs's logs, in
 * tfjs's order, and may stop the training (`model.stopTraining`). Returns a `tf.History`.
 */
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { train } from '../trainer/train.js';
import type { TrainConfig } from '../config-types.js';
import type { TrainSummary } from '../trainer/run-types.js';
import { TandemError } from '../errors.js';
import { fitTargets, type FitTargets } from './fit-targets.js';
import { writeFitFiles } from './fit-files.js';
import { fitCallbackList, type FitParams } from './fit-callbacks.js';
import { fitSettings, tandemOptions, type FitArgs } from './fit-args.js';
import { loadTrainedWeights } from './trained-weights.js';
import { splitValidation, validationLogs } from './fit-validation.js';
import { lrAt } from '../optim/lr-schedule.js';

export type { FitArgs, FitOptions } from './fit-args.js';

interface FitPlan {
  model: tf.LayersModel;
  targets: FitTargets;
  config: TrainConfig;
  stepsPerEpoch: number;
  batchSize: number;
}

/** How the caller's loop differs: fit's or fitDataset's (their params, their batch logs, their validation). */
export interface FitStyle {
  callbacks: FitArgs['callbacks'];
  yieldEvery: FitArgs['yieldEvery'];
  epochs: number;
  initialEpoch: number;
  verbose: number;
  /** The params' samples, steps, batchSize and initialEpoch as the tfjs method sets them. */
  params: Pick<FitParams, 'samples' | 'steps' | 'batchSize' | 'initialEpoch'>;
  /** fitDataset fills batch and size before onBatchBegin; fit after. */
  batchLogsBeforeBegin: boolean;
  /** The epoch's `val_` logs, on the weights trained so far. */
  validate?: () => Promise<Record<string, number>>;
}

/** tfjs's `model.fit(x, y, args)` on tandem's devices; `args` also takes tandem's options (devices, backend, …). */
export async function fit(model: tf.LayersModel, x: tf.Tensor, y: tf.Tensor, args: FitArgs = {}): Promise<tf.History> {
  const settings = fitSettings(args);
  if (!(x instanceof tf.Tensor) || !(y instanceof tf.Tensor))
    throw new TandemError('BAD_DATA', 'fit: x and y must be tensors (one input, one output so far)');
  if (x.shape[0] !== y.shape[0])
    throw new TandemError('BAD_DATA', `fit: x has ${x.shape[0]} samples and y ${y.shape[0]}; give as many of each`);
  tandemOptions(args); // refused before the split
  const { trainX, trainY, validation } = splitValidation(x, y, args);
  try {
    const { batchSize } = settings;
    return await fitWith(model, trainX, trainY, args, {
      ...settings,
      callbacks: args.callbacks,
      yieldEvery: args.yieldEvery,
      params: { samples: trainX.shape[0], steps: null, batchSize, initialEpoch: settings.initialEpoch },
      batchLogsBeforeBegin: false,
      validate: validation && (() => validationLogs(model, validation, batchSize, args)),
    });
  } finally {
    if (trainX !== x) tf.dispose([trainX, trainY]);
    validation?.dispose();
  }
}

/**
 * `x`, `y` trained in batches of `args.batchSize` (in order unless `args.shuffle`), with the loop of `style`; the
 * History returned. fit and fitDataset share it.
 */
export async function fitWith(
  model: tf.LayersModel,
  x: tf.Tensor,
  y: tf.Tensor,
  args: FitArgs,
  style: FitStyle,
): Promise<tf.History> {
  const options = tandemOptions(args);
  const { batchSize, shuffle } = fitSettings(args);
  const targets = fitTargets(model);
  const samples = x.shape[0];
  const stepsPerEpoch = Math.floor(samples / batchSize);
  const labels = targets.labels(y);
  if (samples % batchSize !== 0)
    process.emitWarning(
      `tandem fit: ${samples % batchSize} of ${samples} samples are not trained each epoch: tandem trains ` +
        `full batches of ${batchSize} only (tfjs's model.fit trains the last, smaller batch too)`,
      { code: 'TANDEM_FIT_PARTIAL_BATCH' },
    );
  const files = await writeFitFiles(tf, model, x, labels, targets.classes);
  try {
    const config: TrainConfig = {
      ...options,
      model: files.modelJson,
      data: files.dataModule,
      loss: targets.loss,
      batch: batchSize,
      shuffle,
      checkpointDir: path.join(files.dir, 'checkpoints'),
      checkpointEvery: stepsPerEpoch,
      keepCheckpoints: 1,
      lrScheduleSteps: options.lrScheduleSteps ?? Math.max(1, (style.epochs - style.initialEpoch) * stepsPerEpoch),
    };
    return await epochs({ model, targets, config, stepsPerEpoch, batchSize }, style);
  } finally {
    await files.remove();
  }
}

/** tfjs's fit loop: onTrainBegin, per epoch onEpochBegin, the batches, validation, onEpochEnd; onTrainEnd. */
async function epochs(plan: FitPlan, s: FitStyle): Promise<tf.History> {
  const { model, targets } = plan;
  const outLabels = ['loss', ...targets.metricKeys];
  const metrics = s.validate ? [...outLabels, ...outLabels.map(l => `val_${l}`)] : outLabels;
  const { list, history } = fitCallbackList(model, s.callbacks, s.yieldEvery ?? 'auto', {
    ...s.params,
    epochs: s.epochs,
    verbose: s.verbose,
    doValidation: s.validate !== undefined,
    metrics,
  });
  model.history = history;
  await list.onTrainBegin();
  model.stopTraining = false;
  for (let epoch = s.initialEpoch; epoch < s.epochs; epoch++) {
    await list.onEpochBegin(epoch);
    const run = await trainEpoch(plan, epoch - s.initialEpoch + 1);
    loadTrainedWeights(model, run);
    const trained = run.history.filter(h => h.step > (epoch - s.initialEpoch) * plan.stepsPerEpoch);
    const batchLogs = await batchCallbacks(list, trained, plan, s.batchLogsBeforeBegin);
    const epochLogs: Record<string, number> = s.validate ? await s.validate() : {};
    Object.assign(epochLogs, batchLogs);
    if (run.config.lrSchedule) epochLogs.lr = lrAt(run.config.lrSchedule, run.config.optimizer.lr, run.steps);
    await list.onEpochEnd(epoch, epochLogs);
    if (model.stopTraining) break;
  }
  await list.onTrainEnd();
  await history.syncData();
  return history;
}

/** Epoch `k` of this fit (1 first): the run to its end, resuming epoch k-1's checkpoint. */
function trainEpoch(plan: FitPlan, k: number): Promise<TrainSummary> {
  const { config, stepsPerEpoch } = plan;
  return train({
    ...config,
    steps: k * stepsPerEpoch,
    ...(k > 1 ? { resume: config.checkpointDir } : {}),
  });
}

/**
 * onBatchBegin / onBatchEnd for each batch the epoch trained, with tfjs's batch logs ({ batch, size, loss, acc }),
 * in order once the epoch's run has ended; and the epoch's training logs, the means over its batches.
 */
async function batchCallbacks(
  list: tf.CallbackList,
  trained: TrainSummary['history'],
  plan: FitPlan,
  logsBeforeBegin: boolean,
): Promise<Record<string, number>> {
  const metricKeys = plan.targets.metricKeys;
  const totals: Record<string, number> = { loss: 0 };
  for (const key of metricKeys) totals[key] = 0;
  for (const [batch, h] of trained.entries()) {
    const logs: Record<string, number> = {};
    const counts = () => Object.assign(logs, { batch, size: plan.batchSize });
    if (logsBeforeBegin) counts();
    await list.onBatchBegin(batch, logs);
    if (!logsBeforeBegin) counts(); // model.fit fills them after onBatchBegin
    logs.loss = h.loss;
    for (const key of metricKeys) logs[key] = h.accuracy;
    await list.onBatchEnd(batch, logs);
    for (const key of Object.keys(totals)) totals[key] += (key === 'loss' ? h.loss : h.accuracy) * plan.batchSize;
  }
  const seen = trained.length * plan.batchSize;
  return Object.fromEntries(Object.entries(totals).map(([k, v]) => [k, v / seen]));
}
