/**
 * `fitDataset` of a model of several outputs (fit-outputs.ts): the dataset's `ys` (a Tensor[] in the outputs' order
 * or `{ outputName: Tensor }`) mapped to one flat target row per sample as this thread reads each batch, the
 * flat-output wrapper the devices train, and the outputs' spec, taken from the first batch's targets.
 */
import * as tf from '#tfjs';
import { TandemError } from '../errors.js';
import { requireCompiled, type FitTargets } from './fit-targets.js';
import {
  flatOutputModel,
  flatTargets,
  outputsOf,
  outputsSpec,
  outputsTargets,
  type OutputsSpec,
} from './fit-outputs.js';
import { FIT_OUTPUTS_METHOD_NAME, outputsBatchValues } from './fit-outputs-method.js';
import { validationLogs } from './fit-hosts.js';
import { inputsOf, packInputs, type FitX } from './fit-inputs.js';
import type { OutputsRun } from './fit-several-outputs.js';

/** What fitDataset needs of a model of several outputs. */
export interface DatasetOutputs {
  /** The dataset, its `ys` flat. */
  dataset: tf.data.Dataset<tf.TensorContainer>;
  /** The wrapper the devices train and validate (one flat output). */
  trained: tf.LayersModel;
  targets: FitTargets;
  /** The run's parts, once the first batch is read (its targets' shapes are the spec's). */
  run(): OutputsRun;
}

/**
 * The several outputs of `model` on `dataset` (its `xs` already packed when the model has several inputs: the wrapper
 * cuts them); BAD_MODEL / BAD_CONFIG for what fitDataset does not take with them.
 */
export function datasetOutputs(
  model: tf.LayersModel,
  dataset: tf.data.Dataset<tf.TensorContainer>,
  classWeight: unknown,
): DatasetOutputs {
  if (classWeight !== undefined)
    throw new TandemError(
      'BAD_CONFIG',
      'fitDataset: classWeight with a model of several outputs is not taken yet; leave it out',
    );
  requireCompiled(model, 'fitDataset');
  let spec: OutputsSpec | undefined;
  const flat = dataset.map(element => {
    const { xs, ys } = (element ?? {}) as { xs?: tf.Tensor; ys?: unknown };
    const list = outputsOf(model, ys, 'fitDataset', "a batch's ys");
    spec ??= outputsSpec(model, list, undefined, 'fitDataset');
    return { xs, ys: flatTargets(list) } as tf.TensorContainer;
  });
  const targets = outputsTargets(model);
  return {
    dataset: flat,
    trained: flatOutputModel(model),
    targets,
    run: () => {
      if (!spec) throw new TandemError('BAD_DATA', 'fitDataset: the outputs are known once a first batch is read');
      const plugin = new URL('./fit-outputs-plugin.js', import.meta.url).href;
      return { spec, targets, method: FIT_OUTPUTS_METHOD_NAME, plugin };
    },
  };
}

/**
 * The `val_` logs of a validation dataset with a model of several outputs (its `ys` as the training batches' may be),
 * read on this thread as `model.evaluateDataset` reads a dataset (`batches` of it, or all): each batch's weighted
 * loss and logged metrics as training computes them (fit-outputs-method.ts, no class weights), their means weighted
 * by the batches' samples.
 */
export async function outputsDatasetLogs(
  model: tf.LayersModel,
  outputs: DatasetOutputs,
  data: tf.data.Dataset<tf.TensorContainer>,
  batches?: number,
): Promise<Record<string, number>> {
  const { spec } = outputs.run();
  const totals = new Array<number>(1 + spec.metrics.length).fill(0);
  let samples = 0;
  const iterator = await (batches === undefined ? data : data.take(batches)).iterator();
  for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
    const { xs, ys } = (next.value ?? {}) as { xs?: FitX; ys?: unknown };
    const values = tf.tidy(() => {
      const given = xs ?? (undefined as unknown as FitX);
      const x =
        model.inputs.length > 1
          ? packInputs(inputsOf(model, given, 'validationData (xs)', 'fitDataset'))
          : (given as tf.Tensor);
      const flat = flatTargets(outputsOf(model, ys, 'fitDataset', "validationData's ys"));
      return { rows: x.shape[0], values: outputsBatchValues(tf, spec, outputs.trained.predict(x) as tf.Tensor, flat) };
    });
    values.values.forEach((v, i) => (totals[i] += v * values.rows));
    samples += values.rows;
    tf.dispose(next.value as tf.TensorContainer);
  }
  if (samples === 0) throw new TandemError('BAD_DATA', 'fitDataset: validationData (a dataset) gave no batch');
  return validationLogs([{ sums: totals, samples }], model.metricsNames);
}
