/**
 * `evaluate(model, x, y, args)`: tfjs's `model.evaluate` across devices. The samples are split into contiguous shards
 * of whole batches, one per device thread; each runs tfjs's own `model.evaluate` on its shard (on the backend asked
 * for), and the shards' means weighted by their samples are the result: the batches and their means are one engine's,
 * and so is the weighted mean over them that `model.evaluate` takes. Returns scalars as `model.evaluate` does.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import { defaultBackend, type BackendName } from '../engine/backend.js';
import { modelArtifacts, writeModelFiles } from '../actors/model-files.js';
import { runOneShotWorker } from '../actors/one-shot-worker.js';
import { metricFunctionsOf } from './fit-metrics.js';
import { pluginUrls } from '../config/plugin-urls.js';
import type { EvaluateShard, EvaluateShardReply } from './evaluate-worker.js';
import { shardsOf } from '../data/batch-shards.js';

/** tfjs's `model.evaluate` arguments, and the devices and backend to evaluate on. */
export type EvaluateArgs = tf.ModelEvaluateArgs & { devices?: number; backend?: BackendName; plugins?: string[] };

/** Where a fit's validation runs: its devices, backend and plugins. */
export type ValidationOn = Pick<EvaluateArgs, 'devices' | 'backend' | 'plugins'>;

const KEYS = new Set(['batchSize', 'verbose', 'devices', 'backend', 'plugins']);

/** tfjs's `model.evaluate(x, y, args)` on `devices` threads (default 2), each its share of the batches. */
export async function evaluate(
  model: tf.LayersModel,
  x: tf.Tensor,
  y: tf.Tensor,
  args: EvaluateArgs = {},
): Promise<tf.Scalar | tf.Scalar[]> {
  for (const key of Object.keys(args))
    if (!KEYS.has(key))
      throw new TandemError('BAD_CONFIG', `evaluate: ${key} is not supported (it takes ${[...KEYS].join(', ')})`);
  const { batchSize = 32, devices = 2, backend = defaultBackend() } = args;
  if (!Number.isInteger(batchSize) || batchSize < 1 || !Number.isInteger(devices) || devices < 1)
    throw new TandemError('BAD_CONFIG', `evaluate: batchSize and devices must be positive integers`);
  const loss: unknown = Array.isArray(model.loss) ? model.loss[0] : model.loss;
  if (typeof loss !== 'string' || model.outputs.length !== 1 || model.inputs.length !== 1)
    throw new TandemError(
      'BAD_MODEL',
      'evaluate: the model must be compiled with a loss named by a string, and have one input and one output',
    );
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tandem-evaluate-'));
  try {
    const modelJson = await writeModelFiles(path.join(dir, 'model'), await modelArtifacts(tf, model));
    const job = {
      backend,
      plugins: pluginUrls(args.plugins),
      modelJson,
      loss,
      metrics: metricFunctionsOf(model, 'evaluate'),
      batchSize,
    };
    const replies = await Promise.all(
      shardsOf(x.shape[0], batchSize, devices).map(([from, count], d) =>
        runOneShotWorker<EvaluateShardReply & { type: 'result' }>(
          new URL('./evaluate-worker.js', import.meta.url),
          { ...job, ...samplesOf(x, y, from, count) } satisfies EvaluateShard,
          `evaluation on device ${d}`,
        ),
      ),
    );
    const n = replies.reduce((s, r) => s + r.samples, 0);
    const means = model.metricsNames.map((_, i) => replies.reduce((s, r) => s + r.values[i] * r.samples, 0) / n);
    const scalars = means.map(v => tf.scalar(v));
    return scalars.length === 1 ? scalars[0] : scalars;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export { shardsOf } from '../data/batch-shards.js';

export function samplesOf(x: tf.Tensor, y: tf.Tensor, from: number, count: number) {
  const read = (t: tf.Tensor) => {
    const part = t.slice(from, count);
    const values = Float32Array.from(part.dataSync() as Float32Array);
    part.dispose();
    return values;
  };
  return { x: read(x), xShape: [count, ...x.shape.slice(1)], y: read(y), yShape: [count, ...y.shape.slice(1)] };
}
