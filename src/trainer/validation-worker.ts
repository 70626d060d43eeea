/**
 * Worker entry of the trainer's epoch validation: one device's contiguous run of whole batches of the validation
 * samples, read once from the run's dataset; at each epoch's end it takes the weights trained so far and answers, per
 * batch of the run's global batch size, the loss the devices train with (data-parallel's: the same loss function on the
 * same model), the correct predictions and the metrics' sums, added over its batches (the loss times each batch's
 * samples), as tfjs's `model.evaluate` weighs its batches.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { nameThisThread } from '../engine/thread-name.js';
import * as tf from '#tfjs';
import { serializeError } from '../errors.js';
import { startBackend, type BackendName } from '../engine/backend.js';
import { buildModel, type ModelSpec } from '../model/resolve-model.js';
import { assignWeight } from '../model/flat-weights.js';
import { outputLoss, outputLossOf } from '../model/output-loss.js';
import { targetLoss } from '../model/target-loss.js';
import { metricSums } from '../model/metric-values.js';
import { isRegressionLoss, type LossKind } from '../model/loss-kinds.js';
import { resolveDataset } from '../data/resolve-dataset.js';
import { SampleReader } from '../data/one-sample-view.js';
import { readTargetInto } from '../data/dataset-checks.js';
import { checkedClassLabel } from '../data/class-labels.js';
import { sampleSize, type DatasetSpec } from '../data/dataset.js';
import { sourcePath } from '../source-path.js';
import { loadPlugins } from '../plugins/load-plugins.js';

export interface ValidationShard {
  backend: BackendName;
  plugins: string[];
  model: ModelSpec;
  data: DatasetSpec;
  loss?: LossKind;
  classes: number;
  targetShape?: number[];
  metrics?: string[];
  /** The samples [from, from + count) of the dataset, evaluated in batches of `batch`. */
  from: number;
  count: number;
  batch: number;
}

/** The weights trained so far, in `model.trainableWeights` and `model.nonTrainableWeights` order. */
export interface ValidationRequest {
  weights: Float32Array[];
  state: Float32Array[];
}

/** Sums over the shard: the loss times each batch's samples, the correct predictions, the metrics' two sums each. */
export type ValidationAnswer =
  { type: 'ready' } | { type: 'result'; loss: number; correct: number; metricSums: number[]; samples: number };

async function samplesOf(job: ValidationShard): Promise<{ x: tf.Tensor; y: tf.Tensor }> {
  const ds = await resolveDataset(job.data);
  const reader = new SampleReader(ds, job.data.source);
  const per = reader.sampleFloats;
  const targetFloats = job.targetShape ? sampleSize(job.targetShape) : 1;
  const x = new Float32Array(job.count * per);
  const y = new Float32Array(job.count * targetFloats);
  for (let i = 0; i < job.count; i++) {
    const index = job.from + i;
    const label = reader.read(index, x, i * per);
    if (job.targetShape) readTargetInto(ds, index, y, i * targetFloats, job.data.source);
    else
      y[i] = isRegressionLoss(job.loss)
        ? label
        : checkedClassLabel(label, job.classes, sourcePath(job.data.source), index);
  }
  const ys = job.targetShape
    ? tf.tensor(y, [job.count, ...job.targetShape], 'float32')
    : tf.tensor(y, [job.count], isRegressionLoss(job.loss) ? 'float32' : 'int32');
  return { x: tf.tensor(x, [job.count, ...ds.sampleShape], 'float32'), y: ys };
}

async function serve(job: ValidationShard): Promise<void> {
  await loadPlugins(job.plugins);
  await startBackend(tf, job.backend);
  const model = await buildModel(tf, job.model);
  const { x, y } = await samplesOf(job);
  const spec = outputLossOf(model, job.classes, job.loss);
  const batchSums = (from: number, rows: number): number[] =>
    tf.tidy(() => {
      const out = model.predict(x.slice(from, rows)) as tf.Tensor;
      const ys = y.slice(from, rows);
      const { loss, correct } = job.targetShape
        ? targetLoss(tf, out, ys, spec)
        : outputLoss(tf, out, ys, spec, job.classes);
      const sums = job.metrics?.length ? Array.from(metricSums(tf, job.metrics, ys, out).dataSync()) : [];
      return [loss.dataSync()[0] * rows, correct.dataSync()[0], ...sums];
    });
  parentPort!.on('message', ({ weights, state }: ValidationRequest) => {
    try {
      const set = (vars: tf.LayerVariable[], values: Float32Array[]) =>
        vars.forEach((v, i) =>
          tf.tidy(() => {
            assignWeight(v, tf.tensor(values[i], v.shape as number[], 'float32')); // as trained, unconstrained
          }),
        );
      set(model.trainableWeights, weights);
      set(model.nonTrainableWeights, state);
      const totals: number[] = [];
      for (let from = 0; from < job.count; from += job.batch)
        batchSums(from, Math.min(job.batch, job.count - from)).forEach((v, i) => (totals[i] = (totals[i] ?? 0) + v));
      const [loss, correct, ...metricSums] = totals;
      parentPort!.postMessage({
        type: 'result',
        loss,
        correct,
        metricSums,
        samples: job.count,
      } satisfies ValidationAnswer);
    } catch (err) {
      parentPort!.postMessage({ type: 'error', error: serializeError(err) });
    }
  });
  parentPort!.postMessage({ type: 'ready' } satisfies ValidationAnswer);
}

nameThisThread('validate');
serve(workerData as ValidationShard).catch((err: unknown) =>
  parentPort!.postMessage({ type: 'error', error: serializeError(err) }),
);
