/**
 * Worker entry of the profiler: on its own engine (the backend the devices
 * use), pre-trains the model a few steps exactly as a device does (discarding
 * warm-up steps), then times every layer's forward and backward in isolation
 * and scales those to the measured step, so that per-layer shares are the
 * layers' own and the totals are the real step's.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as tf from '@tensorflow/tfjs';
import { serializeError } from '../errors.js';
import { TandemError } from '../errors.js';
import { startBackend } from '../engine/backend.js';
import { backwardWithGradientReady, forwardAsInTraining } from '../engine/gradient-tape.js';
import { buildTrainingModel, classificationLoss, outputsProbabilities } from '../model/resolve-model.js';
import { flatArithmeticFor } from '../engine/backend.js';
import { loadPlugins } from '../plugins/load-plugins.js';
import type { ResolvedConfig } from '../config-types.js';
import type { LayerCost, ModelProfile } from './layer-profile.js';

export interface ProfileRequest { config: ResolvedConfig; warmupSteps: number; steps: number; reps: number }
export type ProfileReply = { type: 'profile'; profile: ModelProfile } | { type: 'error'; error: ReturnType<typeof serializeError> };

const port = parentPort!;
profile(workerData as ProfileRequest).then(
  p => port.postMessage({ type: 'profile', profile: p } satisfies ProfileReply),
  err => port.postMessage({ type: 'error', error: serializeError(err) } satisfies ProfileReply),
);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function profile({ config, warmupSteps, steps, reps }: ProfileRequest): Promise<ModelProfile> {
  await loadPlugins(config.plugins);
  await startBackend(tf, config.backend, { nativeThreads: config.nativeThreads });
  const model = await buildTrainingModel(tf, config);
  if (!(model instanceof tf.Sequential)) {
    throw new TandemError('BAD_CONFIG', `the profiler times layers one after another and needs a tf.Sequential model; '${config.model.source}' is a functional model. ` +
      'Choose a strategy yourself (--strategy two-group --split-layer P, per-layer, buckets).');
  }
  const b = config.perDevice;
  const x = tf.randomUniform([b, ...config.sampleShape], 0, 1, 'float32', 1);
  const y = tf.tensor1d(Array.from({ length: b }, (_, i) => i % config.classes), 'int32');
  const probabilities = outputsProbabilities(model);
  const vars = model.trainableWeights.map(w => w.read() as tf.Variable);

  // 1. Real training steps, as a device runs them.
  const fwd: number[] = [], bwd: number[] = [], overhead: number[] = [];
  const flat = vars.map(v => v.dataSync().slice() as Float32Array);
  for (let s = 0; s < warmupSteps + steps; s++) {
    const t0 = performance.now();
    vars.forEach((v, i) => { const t = tf.tensor(flat[i], v.shape); v.assign(t); t.dispose(); }); // parameters into the engine
    const t1 = performance.now();
    let tb = 0;
    const marker = tf.customGrad(((t: tf.Tensor) => ({ value: t.clone(), gradFunc: (dy: tf.Tensor) => { tb = performance.now(); return dy; } })) as never) as (t: tf.Tensor) => tf.Tensor;
    const loss = backwardWithGradientReady(tf, () => {
      const { loss, correct } = classificationLoss(tf, marker(model.apply(x, { training: true }) as tf.Tensor), y, config.classes, probabilities);
      correct.dispose();
      return loss;
    }, vars, (i, g) => { flat[i].set(g.dataSync() as Float32Array); });
    loss.dataSync();
    loss.dispose();
    const t2 = performance.now();
    if (s >= warmupSteps) { fwd.push(tb - t1); bwd.push(t2 - tb); overhead.push(t1 - t0); }
  }

  // 2. Every layer alone: forward, and forward+backward against a fixed upstream gradient.
  const layers: LayerCost[] = [];
  let input: tf.Tensor = x;
  for (const layer of model.layers) {
    const weights = layer.trainableWeights.map(w => w.read() as tf.Variable);
    const out = tf.tidy(() => layer.apply(input, { training: true }) as tf.Tensor);
    const dy = tf.randomUniform(out.shape, -1, 1, 'float32', 2);
    const f: number[] = [], fb: number[] = [];
    const differentiable = input !== x || weights.length > 0;
    for (let r = 0; r < reps + 1; r++) {
      const t0 = performance.now();
      const o = forwardAsInTraining(tf, () => layer.apply(input, { training: true }) as tf.Tensor);
      o.dataSync();
      o.dispose();
      const t1 = performance.now();
      if (differentiable) tf.tidy(() => {
        const xs = input === x ? [] : [input];
        const grads = tf.grads((...args: tf.Tensor[]) => {
          const inp = input === x ? input : args[0];
          return tf.sum(tf.mul(layer.apply(inp, { training: true }) as tf.Tensor, dy));
        })([...xs, ...weights]);
        grads.forEach(g => g.dataSync());
      });
      const t2 = performance.now();
      if (r > 0) { f.push(t1 - t0); fb.push(t2 - t1); }
    }
    const forwardMs = median(f);
    const parameters = weights.reduce((s, w) => s + w.size, 0);
    layers.push({ name: layer.name, className: layer.getClassName(), forwardMs, backwardMs: Math.max(0, median(fb) - forwardMs),
      parameters, bytes: parameters * 4, outputSize: out.size });
    dy.dispose();
    if (input !== x) input.dispose();
    input = out;
  }
  if (input !== x) input.dispose();
  // Scale the isolated times to the measured step (shares stay the layers' own).
  const stepForwardMs = median(fwd), stepBackwardMs = median(bwd);
  const sumF = layers.reduce((s, l) => s + l.forwardMs, 0), sumB = layers.reduce((s, l) => s + l.backwardMs, 0);
  for (const l of layers) {
    l.forwardMs *= sumF > 0 ? stepForwardMs / sumF : 0;
    l.backwardMs *= sumB > 0 ? stepBackwardMs / sumB : 0;
  }

  // 3. Exchange and update throughput of shared memory on this machine.
  const arithmetic = flatArithmeticFor(config.backend); // what the comm threads will run
  const n = 1 << 20;
  const a = new Float32Array(n).fill(1), c = new Float32Array(n).fill(2), st = [new Float32Array(n), new Float32Array(n)];
  const tr = performance.now();
  for (let i = 0; i < 5; i++) arithmetic.reduceMeanInto([a, c], a, 0, n);
  const reduceMs = (performance.now() - tr) / 5;
  const tu = performance.now();
  for (let i = 0; i < 5; i++) arithmetic.applyUpdate(config.optimizer, a, c, st, 0, n, i + 1);
  const updateMs = (performance.now() - tu) / 5;

  const weights = model.trainableWeights.map(w => ({ name: w.originalName, shape: [...w.shape] as number[] }));
  tf.dispose([x, y]);
  model.dispose();
  return {
    model: config.model.source, backend: config.backend, batch: b, layers: layers.reverse(),
    stepForwardMs, stepBackwardMs, overheadMs: median(overhead),
    exchangeBytesPerMs: (n * 4) / reduceMs, updateBytesPerMs: (n * 4) / updateMs,
    measuredSteps: steps, warmupSteps, weights,
  };
}
