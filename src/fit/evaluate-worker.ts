/**
 * Worker entry of `evaluate`: one device's contiguous shard of the samples, evaluated by tfjs's own
 * `model.evaluate` on the device's backend (the model loaded from fit's model.json, compiled with the caller's loss
 * and metrics); answers the shard's mean loss and metrics and its sample count.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { nameThisThread } from '../engine/thread-name.js';
import * as tf from '#tfjs';
import { serializeError } from '../errors.js';
import { startBackend, type BackendName } from '../engine/backend.js';
import { loadModelFile } from '../model/file-model-handler.js';
import { assignWeight } from '../model/flat-weights.js';
import { unknownClass } from '../model/resolve-model.js';
import { loadPlugins } from '../plugins/load-plugins.js';
import { compileMetric } from './fit-metrics.js';
import type { OutputsSpec } from './fit-outputs.js';
import { outputsBatchValues } from './fit-outputs-method.js';

export interface EvaluateShard {
  backend: BackendName;
  plugins: string[];
  modelJson: string;
  loss: string;
  /** The tfjs metric functions, by name (fit-metrics.ts). */
  metrics: string[];
  x: Float32Array;
  xShape: number[];
  y: Float32Array;
  yShape: number[];
  batchSize: number;
  /** A model of several outputs (`modelJson` its flat-output wrapper): its outputs, each loss and metric per batch. */
  outputs?: OutputsSpec;
  /** Stays up for a fit's validations: loads the model once, then answers each `{ weights }` message with a result. */
  persistent?: boolean;
}

/** A persistent worker's request: the model's weights (in `model.weights` order) to evaluate the shard on. */
export interface EvaluateRequest {
  weights: Float32Array[];
}

export type EvaluateShardReply =
  { type: 'result'; values: number[]; samples: number } | { type: 'error'; error: ReturnType<typeof serializeError> };

async function loadShard(job: EvaluateShard) {
  await loadPlugins(job.plugins);
  await startBackend(tf, job.backend);
  const model = await loadModelFile(tf, job.modelJson).catch(unknownClass);
  model.compile({ optimizer: 'sgd', loss: job.loss, metrics: job.metrics.map(m => compileMetric(tf, m)) });
  const x = tf.tensor(job.x, job.xShape, 'float32'),
    y = tf.tensor(job.y, job.yShape, 'float32');
  const evaluated = (): EvaluateShardReply => {
    if (job.outputs)
      return {
        type: 'result',
        values: outputsEvaluated(model, job.outputs, x, y, job.batchSize),
        samples: job.xShape[0],
      };
    const out = model.evaluate(x, y, { batchSize: job.batchSize, verbose: 0 });
    const scalars = Array.isArray(out) ? out : [out];
    const values = scalars.map(s => s.dataSync()[0]);
    tf.dispose(scalars);
    return { type: 'result', values, samples: job.xShape[0] };
  };
  return { model, evaluated, dispose: () => (tf.dispose([x, y]), model.dispose()) };
}

/**
 * A model of several outputs: per batch, the weighted loss and each logged metric (fit-outputs-method.ts, as training
 * computes them), their means over the shard weighted by the batches' samples, as `model.evaluate` takes them.
 */
function outputsEvaluated(model: tf.LayersModel, spec: OutputsSpec, x: tf.Tensor, y: tf.Tensor, batchSize: number) {
  const n = x.shape[0];
  const totals = new Array<number>(1 + spec.metrics.length).fill(0);
  for (let from = 0; from < n; from += batchSize) {
    const rows = Math.min(batchSize, n - from);
    const values = tf.tidy(() =>
      outputsBatchValues(tf, spec, model.predict(x.slice(from, rows)) as tf.Tensor, y.slice(from, rows)),
    );
    values.forEach((v, i) => (totals[i] += v * rows));
  }
  return totals.map(t => t / n);
}

async function evaluateShard(job: EvaluateShard): Promise<EvaluateShardReply> {
  const shard = await loadShard(job);
  const reply = shard.evaluated();
  shard.dispose();
  return reply;
}

/** A fit's validation worker: each request's weights set, the shard evaluated, the result answered. */
async function serveShard(job: EvaluateShard): Promise<void> {
  const shard = await loadShard(job);
  parentPort!.on('message', ({ weights }: EvaluateRequest) => {
    try {
      // as trained (not setWeights: tfjs's fit applies no constraint, flat-weights.ts)
      shard.model.weights.forEach((w, i) =>
        tf.tidy(() => assignWeight(w, tf.tensor(weights[i], w.shape as number[], 'float32'))),
      );
      parentPort!.postMessage(shard.evaluated());
    } catch (err) {
      parentPort!.postMessage({ type: 'error', error: serializeError(err) });
    }
  });
  parentPort!.postMessage({ type: 'ready' });
}

nameThisThread('validate');
const job = workerData as EvaluateShard;
if (job.persistent)
  serveShard(job).catch((err: unknown) => parentPort!.postMessage({ type: 'error', error: serializeError(err) }));
else
  evaluateShard(job).then(
    reply => parentPort!.postMessage(reply),
    (err: unknown) => parentPort!.postMessage({ type: 'error', error: serializeError(err) }),
  );
