/**
 * `fitDataset(model, dataset, args)`: tfjs's `model.fitDataset` on tandem's devices, for a finite `tf.data.Dataset` of
 * `{ xs, ys }` batches. The dataset is read once (its batches in order, as one pass of its iterator gives them), and
 * every epoch trains those batches in that order: what `model.fitDataset` does with a dataset that yields the same
 * batches on every pass and no `batchesPerEpoch`. Validation as fitDataset's: a dataset (`model.evaluateDataset`) or
 * tensors (`model.evaluate` in batches of `validationBatchSize`, default 32).
 */
import * as tf from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import { devicesOf, fitWith, type ValidationOn } from './fit.js';
import type { FitOptions } from './fit-args.js';
import { ValidationPool } from './validation-pool.js';

/** tfjs's `model.fitDataset` arguments, and tandem's options in the same object. */
export type FitDatasetArgs<T extends tf.TensorContainer> = tf.ModelFitDatasetArgs<T> & FitOptions;

type Batch = { xs: tf.Tensor; ys: tf.Tensor };

/** tfjs's `model.fitDataset(dataset, args)` on tandem's devices. */
export async function fitDataset<T extends tf.TensorContainer>(
  model: tf.LayersModel,
  dataset: tf.data.Dataset<T>,
  args: FitDatasetArgs<T>,
): Promise<tf.History> {
  const {
    batchesPerEpoch,
    validationData,
    validationBatchSize,
    validationBatches,
    callbacks,
    yieldEvery,
    epochs,
    initialEpoch,
    verbose,
    ...options
  } = args;
  const batches = await readBatches(dataset);
  if (batchesPerEpoch !== undefined && batchesPerEpoch !== batches.length)
    throw new TandemError(
      'BAD_CONFIG',
      `fitDataset: batchesPerEpoch ${batchesPerEpoch}, and one pass of the dataset gives ${batches.length} batches; ` +
        'tandem trains one pass per epoch so far: take(batchesPerEpoch) of the dataset and leave batchesPerEpoch out',
    );
  const batchSize = batches[0].xs.shape[0];
  const x = tf.concat(batches.map(b => b.xs)),
    y = tf.concat(batches.map(b => b.ys));
  tf.dispose(batches.flatMap(b => [b.xs, b.ys]));
  const validation =
    validationData &&
    validator(model, validationData, { batchSize: validationBatchSize, batches: validationBatches }, args);
  try {
    return await fitWith(
      model,
      x,
      y,
      { ...options, batchSize, shuffle: false },
      {
        callbacks,
        yieldEvery,
        epochs,
        initialEpoch: initialEpoch ?? 0,
        verbose: verbose ?? 1,
        params: { samples: null, steps: stepsOf(dataset, batchesPerEpoch), batchSize: null, initialEpoch: null },
        batchLogsBeforeBegin: true,
        validate: validation?.logs,
      },
    );
  } finally {
    await validation?.close();
    tf.dispose([x, y]);
  }
}

/** One pass of the dataset: its {xs, ys} batches, each of the first batch's size (the last may be less). */
async function readBatches<T extends tf.TensorContainer>(dataset: tf.data.Dataset<T>): Promise<Batch[]> {
  const batches: Batch[] = [];
  const iterator = await dataset.iterator();
  for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
    const value = next.value as unknown as Partial<Batch>;
    if (!(value?.xs instanceof tf.Tensor) || !(value?.ys instanceof tf.Tensor))
      throw new TandemError(
        'BAD_DATA',
        `fitDataset: batch ${batches.length} is not { xs: Tensor, ys: Tensor } (one input, one output so far)`,
      );
    batches.push({ xs: value.xs, ys: value.ys });
  }
  if (batches.length === 0) throw new TandemError('BAD_DATA', 'fitDataset: the dataset gave no batch');
  const size = batches[0].xs.shape[0];
  const odd = batches.findIndex((b, i) => i < batches.length - 1 && b.xs.shape[0] !== size);
  if (odd >= 0)
    throw new TandemError(
      'BAD_DATA',
      `fitDataset: batch ${odd} has ${batches[odd].xs.shape[0]} samples and batch 0 ${size}; tandem trains batches ` +
        'of one size (only the last may be smaller): batch the dataset with dataset.batch(size)',
    );
  return batches;
}

/** fitDataset's validation: evaluateDataset for a dataset, evaluate in batches of validationBatchSize for tensors. */
function validator<T extends tf.TensorContainer>(
  model: tf.LayersModel,
  data: NonNullable<tf.ModelFitDatasetArgs<T>['validationData']>,
  { batchSize = 32, batches }: { batchSize?: number; batches?: number },
  on: ValidationOn,
): { logs: () => Promise<Record<string, number>>; close(): Promise<void> } {
  if (Array.isArray(data)) {
    const [x, y] = data;
    if (!(x instanceof tf.Tensor) || !(y instanceof tf.Tensor) || data.length > 2)
      throw new TandemError('BAD_DATA', 'fitDataset: validationData must be a dataset or [x, y] of two tensors');
    const pool = new ValidationPool(model, x, y, batchSize, devicesOf(on));
    return { logs: () => pool.logs(), close: () => pool.close() };
  }
  const logs = async () => {
    // a dataset: read on this thread, as model.evaluateDataset reads it
    const out = await model.evaluateDataset(data as tf.data.Dataset<never>, { batches });
    const scalars = Array.isArray(out) ? out : [out];
    const logs: Record<string, number> = {};
    for (const [i, name] of model.metricsNames.entries()) logs[`val_${name}`] = (await scalars[i].data())[0];
    tf.dispose(scalars);
    return logs;
  };
  return { logs, close: async () => {} };
}

/** The params' steps, as tfjs's getStepsPerEpoch: batchesPerEpoch, else the dataset's size when known. */
function stepsOf<T extends tf.TensorContainer>(dataset: tf.data.Dataset<T>, batchesPerEpoch?: number): number | null {
  return batchesPerEpoch ?? (Number.isFinite(dataset.size) ? dataset.size : null);
}
