/**
 * Worker entry of `evaluate`: one device's contiguous shard of the samples, evaluated by tfjs's own
 * `model.evaluate` on the device's backend (the model loaded from fit's model.json, compiled with the caller's loss
 * and metrics); answers the shard's mean loss and metrics and its sample count.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as tf from '@tensorflow/tfjs';
import { serializeError } from '../errors.js';
import { startBackend, type BackendName } from '../engine/backend.js';
import { fileModelHandler } from '../model/file-model-handler.js';
import { loadPlugins } from '../plugins/load-plugins.js';

export interface EvaluateShard {
  backend: BackendName;
  plugins: string[];
  modelJson: string;
  loss: string;
  metrics: string[];
  x: Float32Array;
  xShape: number[];
  y: Float32Array;
  yShape: number[];
  batchSize: number;
}

export type EvaluateShardReply =
  { type: 'result'; values: number[]; samples: number } | { type: 'error'; error: ReturnType<typeof serializeError> };

async function evaluateShard(job: EvaluateShard): Promise<EvaluateShardReply> {
  await loadPlugins(job.plugins);
  await startBackend(tf, job.backend);
  const model = await tf.loadLayersModel(fileModelHandler(job.modelJson));
  model.compile({ optimizer: 'sgd', loss: job.loss, metrics: job.metrics });
  const x = tf.tensor(job.x, job.xShape, 'float32'),
    y = tf.tensor(job.y, job.yShape, 'float32');
  const out = model.evaluate(x, y, { batchSize: job.batchSize, verbose: 0 });
  const scalars = Array.isArray(out) ? out : [out];
  const values = scalars.map(s => s.dataSync()[0]);
  tf.dispose([x, y, ...scalars]);
  model.dispose();
  return { type: 'result', values, samples: job.xShape[0] };
}

evaluateShard(workerData as EvaluateShard).then(
  reply => parentPort!.postMessage(reply),
  (err: unknown) => parentPort!.postMessage({ type: 'error', error: serializeError(err) }),
);
