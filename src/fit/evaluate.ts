/**
 * `evaluate(model, x, y, args)`: tfjs's `model.evaluate` across devices. The samples are split into contiguous shards
 * of whole batches, one per device thread; each runs tfjs's own `model.evaluate` on its shard (on the backend asked
 * for), and the shards' means weighted by their samples are the result: the batches and their means are one engine's,
 * and so is the weighted mean over them that `model.evaluate` takes. Returns scalars as `model.evaluate` does.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as tf from '#tfjs';
import { TandemError } from '../errors.js';
import { DEFAULT_DEVICES } from '../world/world-options.js';
import { defaultBackend, type BackendName } from '../engine/backend.js';
import { modelArtifacts, writeModelFiles } from '../actors/model-files.js';
import { runOneShotWorker } from '../actors/one-shot-worker.js';
import { metricFunctionsOf } from './fit-metrics.js';
import { warnIgnoredArgs } from './fit-args.js';
import { pluginUrls } from '../config/plugin-urls.js';
import type { EvaluateShard, EvaluateShardReply } from './evaluate-worker.js';
import { shardsOf } from '../data/batch-shards.js';
import { flatOutputModel, flatTargets, onOutputsPath, outputsOf, outputsSpec } from './fit-outputs.js';
import { flatInputModel, inputsOf, packInputs, type FitX } from './fit-inputs.js';

/** tfjs's `model.evaluate` arguments, and the devices and backend to evaluate on. */
export type EvaluateArgs = tf.ModelEvaluateArgs & { devices?: number; backend?: BackendName; plugins?: string[] };

/** Where a fit's validation runs: its devices, backend and plugins. */
export type ValidationOn = Pick<EvaluateArgs, 'devices' | 'backend' | 'plugins'>;

const KEYS = new Set(['batchSize', 'verbose', 'devices', 'backend', 'plugins']);
/** What tfjs 4.22's model.evaluate takes and ignores (it standardises no sample weights), by key: what runs instead. */
const EVALUATE_IGNORED: Readonly<Record<string, string>> = { sampleWeight: 'every sample weighs the same' };

/**
 * tfjs's `model.evaluate(x, y, args)` on `devices` threads (default 2), each its share of the batches. A model of
 * several inputs takes `x` as a Tensor[] (the inputs' order) or `{ inputName: Tensor }`; one of several outputs `y`
 * as a Tensor[] or `{ outputName: Tensor }`, and returns the values of `model.metricsNames` (the total loss, the sum
 * of the outputs' losses, first).
 */
export async function evaluate(
  model: tf.LayersModel,
  x: FitX,
  y: tf.Tensor | tf.Tensor[] | Record<string, tf.Tensor>,
  args: EvaluateArgs = {},
): Promise<tf.Scalar | tf.Scalar[]> {
  for (const key of Object.keys(args))
    if (!KEYS.has(key) && !Object.hasOwn(EVALUATE_IGNORED, key))
      throw new TandemError('BAD_CONFIG', `evaluate: ${key} is not supported (it takes ${[...KEYS].join(', ')})`);
  warnIgnoredArgs(args, EVALUATE_IGNORED, 'evaluate');
  const { batchSize = 32, devices = DEFAULT_DEVICES, backend = defaultBackend() } = args;
  if (!Number.isInteger(batchSize) || batchSize < 1 || !Number.isInteger(devices) || devices < 1)
    throw new TandemError('BAD_CONFIG', `evaluate: batchSize and devices must be positive integers`);
  const run = evaluated(model, x, y);
  if (run.x.shape[0] === 0) {
    run.dispose();
    return []; // as model.evaluate returns for no samples: no batch, no value
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tandem-evaluate-'));
  try {
    const modelJson = await writeModelFiles(path.join(dir, 'model'), await modelArtifacts(tf, run.model));
    const job = {
      backend,
      plugins: pluginUrls(args.plugins),
      modelJson,
      loss: run.loss,
      metrics: run.spec ? [] : metricFunctionsOf(model, 'evaluate'),
      batchSize,
      ...(run.spec ? { outputs: run.spec } : {}),
    };
    const replies = await Promise.all(
      shardsOf(run.x.shape[0], batchSize, devices).map(([from, count], d) =>
        runOneShotWorker<EvaluateShardReply & { type: 'result' }>(
          new URL('./evaluate-worker.js', import.meta.url),
          { ...job, ...samplesOf(run.x, run.y, from, count) } satisfies EvaluateShard,
          `evaluation on device ${d}`,
        ),
      ),
    );
    const n = replies.reduce((s, r) => s + r.samples, 0);
    const means = model.metricsNames.map((_, i) => replies.reduce((s, r) => s + r.values[i] * r.samples, 0) / n);
    const scalars = means.map(v => tf.scalar(v));
    return scalars.length === 1 ? scalars[0] : scalars;
  } finally {
    run.dispose();
    await rm(dir, { recursive: true, force: true });
  }
}

export { shardsOf } from '../data/batch-shards.js';

/**
 * What the devices evaluate: the model, or its wrapper of one flat input (several inputs: `x` packed) and one flat
 * output (several outputs: `y` flat, the outputs' spec with every loss weighing 1, as tfjs sums them).
 */
function evaluated(model: tf.LayersModel, x: FitX, y: unknown) {
  const inputs = inputsOf(model, x, 'x', 'evaluate');
  const ys = onOutputsPath(model) ? outputsOf(model, y, 'evaluate') : undefined;
  if (!ys) y = outputsOf(model, y, 'evaluate')[0]; // a Tensor, [Tensor] or { outputName: Tensor }, as tfjs takes it
  const loss: unknown = Array.isArray(model.loss) ? model.loss[0] : model.loss;
  if (!ys && typeof loss !== 'string')
    throw new TandemError('BAD_MODEL', 'evaluate: the model must be compiled with a loss named by a string');
  const [n, m] = [inputs[0].shape[0], (ys?.[0] ?? (y as tf.Tensor)).shape[0]];
  if (n !== m) throw new TandemError('BAD_DATA', `evaluate: x has ${n} samples and y ${m}; give as many of each`);
  const spec = ys && outputsSpec(model, ys, undefined, 'evaluate');
  const flatY = ys ? flatTargets(ys) : (y as tf.Tensor);
  const flatX = packInputs(inputs);
  return {
    model: ys ? flatOutputModel(model) : inputs.length > 1 ? flatInputModel(model) : model,
    x: flatX,
    y: flatY,
    loss: ys ? 'meanSquaredError' : (loss as string), // several outputs: each output's loss is the spec's
    spec,
    dispose: () => tf.dispose([...(flatY !== y ? [flatY] : []), ...(flatX !== inputs[0] ? [flatX] : [])]),
  };
}

export function samplesOf(x: tf.Tensor, y: tf.Tensor, from: number, count: number) {
  const read = (t: tf.Tensor) => {
    const part = t.slice(from, count);
    const values = Float32Array.from(part.dataSync() as Float32Array);
    part.dispose();
    return values;
  };
  return { x: read(x), xShape: [count, ...x.shape.slice(1)], y: read(y), yShape: [count, ...y.shape.slice(1)] };
}
