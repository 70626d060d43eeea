/**
 * `fitDataset(model, dataset, args)`: tfjs's `model.fitDataset` on tandem's devices, for a `tf.data.Dataset` of
 * `{ xs, ys }` batches, streamed: this thread iterates the dataset (a dataset made here can only be iterated here)
 * into a bounded ring of shared buffers, `readAhead` batches deep (default 3); the loader threads split each batch
 * over the devices' input slots, as for any dataset. Memory for the data: the ring, `readAhead × batch bytes`, plus
 * the devices' two input slots and the batch being read (docs/guide/data.md). Epochs as model.fitDataset's: without
 * `batchesPerEpoch`, one pass of the dataset each (counted by one pass before training); with it, one iterator for
 * the whole fit. Validation as fitDataset's: a dataset (`model.evaluateDataset`) or tensors (`model.evaluate` in
 * batches of `validationBatchSize`, default 32). A model of several outputs: batches' `ys` a Tensor[] or
 * `{ outputName: Tensor }`, trained as fit trains them (fit-dataset-outputs.ts); of several inputs: batches' `xs` a
 * Tensor[] (the inputs' order) or `{ inputName: Tensor }`, packed into one flat row per sample as fit packs them
 * (fit-inputs.ts).
 */
import * as tf from '#tfjs';
import type { TrainConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import { openRingSource, type RingSource } from '../data/ring-source.js';
import { sampleSize } from '../data/dataset.js';
import { devicesOf, type ValidationOn } from './fit.js';
import { checkBatchCoversDevices, fitSettings, tandemOptions, type FitOptions } from './fit-args.js';
import { fitTargets, requireCompiled, type FitTargets } from './fit-targets.js';
import { datasetOutputs, outputsDatasetLogs, type DatasetOutputs } from './fit-dataset-outputs.js';
import { flatTargets, onOutputsPath, outputsOf, writeOutputsSpec } from './fit-outputs.js';
import { writeFitFiles } from './fit-files.js';
import { fitLoop, type FitStyle } from './fit-loop.js';
import { classWeightOf } from './fit-class-weight.js';
import { ValidationPool } from './validation-pool.js';
import { flatInputModel, inputsOf, packInputs, type FitX } from './fit-inputs.js';
import { DatasetStream, type BatchArrays, type StreamShape } from '../data/dataset-stream.js';
import { spansSteps } from '../optim/lr-schedule.js';
import { asOnlyFit } from './one-fit.js';

/** tfjs's `model.fitDataset` arguments, and tandem's options in the same object. */
export type FitDatasetArgs<T extends tf.TensorContainer> = tf.ModelFitDatasetArgs<T> &
  FitOptions & {
    /** Batches read ahead of training into shared memory (default 3): the data's memory bound. */
    readAhead?: number;
  };

export const DEFAULT_READ_AHEAD = 3;

/** tfjs's `model.fitDataset(dataset, args)` on tandem's devices. */
export async function fitDataset<T extends tf.TensorContainer>(
  model: tf.LayersModel,
  dataset: tf.data.Dataset<T>,
  args: FitDatasetArgs<T>,
): Promise<tf.History> {
  return asOnlyFit(model, 'fitDataset', () => fitDatasetOnce(model, dataset, args));
}

async function fitDatasetOnce<T extends tf.TensorContainer>(
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
    epochs = 1,
    initialEpoch = 0,
    verbose,
    classWeight,
    readAhead = DEFAULT_READ_AHEAD,
    ...options
  } = args;
  checkCounts(batchesPerEpoch, readAhead);
  fitSettings({ epochs, initialEpoch }, 'fitDataset');
  const tandem = tandemOptions(options);
  const { data, outputs, trained, targets } = devicesModel(model, dataset, classWeight);
  const reading = {
    who: 'fitDataset',
    inputShape: trained.inputs[0].shape.slice(1),
    targets: (ys: tf.Tensor) => targets.targets(ys),
  };
  const stream = new DatasetStream(data, reading, batchesPerEpoch);
  const { shape, first } = await stream.open();
  const validation =
    validationData &&
    validator(
      model,
      validationData,
      { batchSize: validationBatchSize, batches: validationBatches, outputs, trained },
      args,
    );
  const style: FitStyle = {
    callbacks,
    yieldEvery,
    epochs,
    initialEpoch,
    verbose: verbose ?? 1,
    params: { samples: null, steps: stepsOf(dataset, batchesPerEpoch), batchSize: null, initialEpoch: null },
    batchLogsBeforeBegin: true,
    validate: validation?.logs,
  };
  try {
    const config = {
      ...tandem,
      ...(classWeight ? { classWeight: classWeightOf(classWeight, model, targets, shape.firstY) } : {}),
    };
    return await streamed(model, stream, { shape, first, readAhead, config, targets, outputs, trained }, style);
  } finally {
    await validation?.close();
  }
}

function checkCounts(batchesPerEpoch: number | undefined, readAhead: number): void {
  if (batchesPerEpoch !== undefined && (!Number.isInteger(batchesPerEpoch) || batchesPerEpoch < 1))
    throw new TandemError('BAD_CONFIG', `fitDataset: batchesPerEpoch must be an integer ≥ 1, got ${batchesPerEpoch}`);
  if (!Number.isInteger(readAhead) || readAhead < 1)
    throw new TandemError('BAD_CONFIG', `fitDataset: readAhead must be an integer ≥ 1, got ${readAhead}`);
}

/**
 * What the devices build of `model` — the model, its flat-input wrapper (several inputs), or its flat-output one
 * (several outputs) — with the dataset as they read it and its targets.
 */
function devicesModel<T extends tf.TensorContainer>(
  model: tf.LayersModel,
  dataset: tf.data.Dataset<T>,
  classWeight: unknown,
) {
  requireCompiled(model, 'fitDataset');
  const packed = packedInputs(model, dataset as tf.data.Dataset<tf.TensorContainer>);
  const outputs = onOutputsPath(model) ? datasetOutputs(model, packed, classWeight) : undefined;
  const trained = outputs?.trained ?? (model.inputs.length > 1 ? flatInputModel(model) : model);
  const targets = outputs?.targets ?? fitTargets(trained, 'fitDataset');
  return { data: outputs?.dataset ?? packed, outputs, trained, targets };
}

interface StreamedRun {
  shape: StreamShape;
  first: BatchArrays;
  readAhead: number;
  /** tandem's options, and the class weights. */
  config: Partial<TrainConfig>;
  targets: FitTargets;
  /** A model of several outputs (fit-dataset-outputs.ts). */
  outputs?: DatasetOutputs;
  /** What the devices build (the model or a wrapper of it). */
  trained: tf.LayersModel;
}

/** The fit's epochs over the stream: the ring published, batch 0 in it, the rest produced while the devices train. */
async function streamed(
  model: tf.LayersModel,
  stream: DatasetStream,
  { shape, first, readAhead, config, targets, outputs, trained }: StreamedRun,
  style: FitStyle,
): Promise<tf.History> {
  const { batch, batchSizes, sampleShape, targetShape } = shape;
  checkBatchCoversDevices(
    config,
    batch,
    `fitDataset: the dataset's batches of ${batch} are`,
    n => `batch it by ${n} or more`,
  );
  const stepsPerEpoch = batchSizes.length;
  const total = (style.epochs - style.initialEpoch) * stepsPerEpoch;
  const files = await modelFiles(trained, first, shape, targets.classes);
  const run = outputs?.run();
  if (run) await writeOutputsSpec(files.modelJson, run.spec);
  let source: RingSource | undefined;
  let failure: unknown;
  let producing: Promise<void> = Promise.resolve();
  try {
    source = await openRingSource(
      files.dir,
      {
        depth: readAhead,
        batch,
        batchesPerEpoch: stepsPerEpoch,
        sampleFloats: sampleSize(sampleShape),
        targetFloats: targetShape ? sampleSize(targetShape) : 1,
      },
      { size: batchSizes.reduce((a, b) => a + b, 0), sampleShape, classes: targets.classes, targetShape },
    );
    const { ring } = source;
    await ring.put(0, first.samples, first.targets, first.count);
    producing = stream.produce(ring, total, batchSizes).catch((err: unknown) => {
      failure = err;
      ring.fail(err instanceof Error ? err.message : String(err));
    });
    const trainConfig: TrainConfig = {
      ...config,
      ...(run ? { method: run.method, plugins: [...(config.plugins ?? []), run.plugin] } : {}),
      model: files.modelJson,
      data: source.dataModule,
      loss: targets.loss,
      batch,
      shuffle: false,
      partialBatch: (config.accumulate ?? 1) === 1,
      ...(spansSteps(config.lrSchedule) ? { lrScheduleSteps: config.lrScheduleSteps ?? Math.max(1, total) } : {}),
      ...(targets.metrics ? { metrics: targets.metrics } : {}),
    };
    return await fitLoop({ model, targets, config: trainConfig, stepsPerEpoch, batchSize: batch, batchSizes }, style);
  } catch (err) {
    throw failure ?? err; // the dataset's own error rather than the loader's report of it
  } finally {
    source?.close();
    await producing;
    await files.remove();
  }
}

/** The model's files for the run (fit's sample files hold batch 0, which nothing reads). */
async function modelFiles(model: tf.LayersModel, first: BatchArrays, shape: StreamShape, classes: number) {
  const { sampleShape, targetShape } = shape;
  const x = tf.tensor(first.samples.subarray(0, first.count * sampleSize(sampleShape)), [first.count, ...sampleShape]);
  try {
    return await writeFitFiles(tf, model, x, { values: first.targets, targetShape }, classes, 'fitDataset');
  } finally {
    x.dispose();
  }
}

/** fitDataset's validation: evaluateDataset for a dataset, evaluate in batches of validationBatchSize for tensors. */
function validator<T extends tf.TensorContainer>(
  model: tf.LayersModel,
  data: NonNullable<tf.ModelFitDatasetArgs<T>['validationData']>,
  {
    batchSize = 32,
    batches,
    outputs,
    trained,
  }: { batchSize?: number; batches?: number; outputs?: DatasetOutputs; trained: tf.LayersModel },
  on: ValidationOn,
): { logs: () => Promise<Record<string, number>>; close(): Promise<void> } {
  if (Array.isArray(data)) {
    const [given, y] = data;
    if (!(outputs || y instanceof tf.Tensor) || data.length > 2)
      throw new TandemError('BAD_DATA', 'fitDataset: validationData must be a dataset or [x, y] of two tensors');
    // x a Tensor, or a Tensor[] or { inputName: Tensor }, packed as the batches are (one input's: the caller's)
    const inputs =
      given instanceof tf.Tensor ? [given] : inputsOf(model, given as FitX, 'validationData', 'fitDataset');
    const x = packInputs(inputs);
    const unpack = () => void (x !== inputs[0] && x.dispose());
    if (outputs) return packedClose(outputsValidator(model, outputs, x, y, batchSize, on), unpack);
    const pool = new ValidationPool(trained, x, y as tf.Tensor, batchSize, devicesOf(on));
    return { logs: () => pool.logs(), close: () => pool.close().finally(unpack) };
  }
  if (outputs) {
    const dataset = data as tf.data.Dataset<tf.TensorContainer>;
    return { logs: () => outputsDatasetLogs(model, outputs, dataset, batches), close: async () => {} };
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

/** Validation of a model of several outputs on tensors: its wrapper on the flat targets, logged by metricsNames. */
function outputsValidator(
  model: tf.LayersModel,
  outputs: DatasetOutputs,
  x: tf.Tensor,
  y: unknown,
  batchSize: number,
  on: ValidationOn,
): { logs: () => Promise<Record<string, number>>; close(): Promise<void> } {
  const flat = flatTargets(outputsOf(model, y, 'fitDataset', "validationData's y"));
  const names = { spec: outputs.run().spec, names: model.metricsNames };
  const pool = new ValidationPool(outputs.trained, x, flat, batchSize, devicesOf(on), names);
  return { logs: () => pool.logs(), close: () => pool.close().finally(() => flat.dispose()) };
}

/** `v` whose close also runs `after`. */
function packedClose<V extends { close(): Promise<void> }>(v: V, after: () => void): V {
  return { ...v, close: () => v.close().finally(after) };
}

/**
 * The dataset's batches as the devices read them: `xs` (a Tensor, or a Tensor[] in the inputs' order or `{ inputName:
 * Tensor }`, as tfjs takes it) as one tensor, several inputs packed into one [batch, total] tensor as fit packs x; for
 * a model of one output, `ys` given as a Tensor[] of one or `{ outputName: Tensor }` as that tensor.
 */
function packedInputs(
  model: tf.LayersModel,
  dataset: tf.data.Dataset<tf.TensorContainer>,
): tf.data.Dataset<tf.TensorContainer> {
  if (model.inputs.length === 0) return dataset; // an unbuilt Sequential has no inputs yet
  const [oneInput, oneOutput] = [model.inputs.length === 1, model.outputs.length === 1];
  return dataset.map(element => {
    const { xs, ys } = (element ?? {}) as { xs?: FitX; ys?: tf.TensorContainer };
    const yAsIs = !oneOutput || ys instanceof tf.Tensor || ys === undefined;
    if (oneInput && xs instanceof tf.Tensor && yAsIs) return element;
    if (xs === undefined)
      throw new TandemError('BAD_DATA', 'fitDataset: each element must be { xs, ys }; this one has no xs');
    const x = packInputs(inputsOf(model, xs, 'a batch of the dataset (xs)', 'fitDataset'));
    const asOne = oneOutput && ys !== undefined && !(ys instanceof tf.Tensor);
    const y = asOne ? outputsOf(model, ys, 'fitDataset', "a batch's ys")[0] : ys;
    return { xs: x, ys: y } as tf.TensorContainer;
  });
}

/** The params' steps, as tfjs's getStepsPerEpoch: batchesPerEpoch, else the dataset's size when known. */
function stepsOf<T extends tf.TensorContainer>(dataset: tf.data.Dataset<T>, batchesPerEpoch?: number): number | null {
  return batchesPerEpoch ?? (Number.isFinite(dataset.size) ? dataset.size : null);
}
