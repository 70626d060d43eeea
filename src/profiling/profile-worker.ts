/**
 * Worker entry of the profiler: on its own engine (the backend the devices
 * use), pre-trains the model a few steps exactly as a device does (discarding
 * warm-up steps), then times every layer's forward and backward alone, in
 * topological order (Sequential and functional models alike), and scales
 * those to the measured step, so that per-layer shares are the layers' own and
 * the totals are the real step's. Every time is taken on the profiler's clock
 * (the thread's CPU time where the engine computes on this thread), so a busy
 * machine does not stretch some layers' times and not others'. On an engine
 * without synchronous reads (webgpu) every fence is an awaited read and the
 * clock the wall clock (an accelerator's work is not CPU time).
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as tf from '#tfjs';
import { serializeError } from '../errors.js';
import { engineStartOptions, kernelSiteOf, startBackend, flatArithmeticFor } from '../engine/backend.js';
import { backwardWithGradientReady } from '../engine/gradient-tape.js';
import { OrderedReads } from '../engine/async-reads.js';
import { getEngine } from '../engine/engine-registry.js';
import { buildTrainingModel, classificationLoss, outputsProbabilities } from '../model/resolve-model.js';
import { loadPlugins } from '../plugins/load-plugins.js';
import { trainBatchNormalization } from '../model/sync-batch-norm.js';
import type { ProfileConfig } from './profile-config.js';
import type { ModelProfile } from './layer-profile.js';
import { clockOfKind, layerClock, type ClockKind, type LayerClock } from './layer-clock.js';
import { layerGraph } from './layer-graph.js';
import { median, timeLayers } from './time-layers.js';
import { readFence } from './read-fence.js';
import { optimizerStateSlots } from '../optim/flat-optimizer.js';
import { weightShapes } from '../model/parameter-layout.js';

export interface ProfileRequest {
  config: ProfileConfig;
  warmupSteps: number;
  steps: number;
  reps: number;
  clock?: ClockKind;
}
export type ProfileReply =
  { type: 'profile'; profile: ModelProfile } | { type: 'error'; error: ReturnType<typeof serializeError> };

const port = parentPort!;
profile(workerData as ProfileRequest).then(
  p => port.postMessage({ type: 'profile', profile: p } satisfies ProfileReply),
  err => port.postMessage({ type: 'error', error: serializeError(err) } satisfies ProfileReply),
);

async function profile({ config, warmupSteps, steps, reps, clock: kind }: ProfileRequest): Promise<ModelProfile> {
  await loadPlugins(config.plugins);
  const engineOptions = engineStartOptions(config);
  await startBackend(tf, config.backend, engineOptions);
  const model = await buildTrainingModel(tf, config);
  const synchronousReads = getEngine(config.backend).capabilities.synchronousReads;
  // BatchNormalization as the devices train it: tandem's kernel (local statistics: no collective here), or, on an
  // engine without synchronous reads, tfjs's own layer.
  if (synchronousReads) trainBatchNormalization(tf, model);
  const fence = readFence(synchronousReads);
  const graph = layerGraph(tf, model); // refuses what it cannot walk before any timing
  const clock = kind ? clockOfKind(kind) : layerClock(kernelSiteOf(config.backend, engineOptions));
  try {
    const b = config.perDevice;
    const x = tf.randomUniform([b, ...config.sampleShape], 0, 1, 'float32', 1);
    // The model's outputs are the classes (data-parallel) or the embedding (local-head, partial-fc: the extractor,
    // whose head is the device's own): labels and the softmax over them, so the extractor's steps are what is timed.
    const outputs = config.model.options.classes;
    const y = tf.tensor1d(
      Array.from({ length: b }, (_, i) => i % outputs),
      'int32',
    );
    const step = synchronousReads
      ? measureSteps(model, x, y, config, clock, warmupSteps, steps)
      : await measureStepsAsync(model, x, y, config, clock, warmupSteps, steps);
    const layers = await timeLayers(tf, graph, x, clock, reps, fence);
    // Scale the isolated times to the measured step (shares stay the layers' own).
    const sumF = layers.reduce((s, l) => s + l.forwardMs, 0),
      sumB = layers.reduce((s, l) => s + l.backwardMs, 0);
    for (const l of layers) {
      l.forwardMs *= sumF > 0 ? step.forwardMs / sumF : 0;
      l.backwardMs *= sumB > 0 ? step.backwardMs / sumB : 0;
    }
    const throughput = measureThroughput(config, clock);
    const weights = weightShapes(model.trainableWeights);
    tf.dispose([x, y]);
    model.dispose();
    return {
      model: config.model.source,
      backend: config.backend,
      batch: b,
      layers: layers.reverse(),
      stepForwardMs: step.forwardMs,
      stepBackwardMs: step.backwardMs,
      overheadMs: step.overheadMs,
      ...throughput,
      measuredSteps: steps,
      warmupSteps,
      reps,
      clock: { kind: clock.kind, reason: clock.reason },
      weights,
    };
  } finally {
    clock.close();
  }
}

type Model = Awaited<ReturnType<typeof buildTrainingModel>>;

/** Real training steps, as a device runs them: medians of forward, backward and loading the parameters. */
function measureSteps(
  model: Model,
  x: tf.Tensor,
  y: tf.Tensor,
  config: ProfileConfig,
  clock: LayerClock,
  warmupSteps: number,
  steps: number,
) {
  const probabilities = outputsProbabilities(model);
  const vars = model.trainableWeights.map(w => w.read() as tf.Variable);
  const fwd: number[] = [],
    bwd: number[] = [],
    overhead: number[] = [];
  const flat = vars.map(v => v.dataSync().slice() as Float32Array);
  for (let s = 0; s < warmupSteps + steps; s++) {
    const t0 = clock.nowMs();
    vars.forEach((v, i) => {
      const t = tf.tensor(flat[i], v.shape);
      v.assign(t);
      t.dispose();
    }); // parameters into the engine
    const t1 = clock.nowMs();
    let tb = 0;
    const marker = tf.customGrad(((t: tf.Tensor) => ({
      value: t.clone(),
      gradFunc: (dy: tf.Tensor) => {
        tb = clock.nowMs();
        return dy;
      },
    })) as never) as (t: tf.Tensor) => tf.Tensor;
    const loss = backwardWithGradientReady(
      tf,
      () => {
        const { loss, correct } = classificationLoss(
          tf,
          marker(model.apply(x, { training: true }) as tf.Tensor),
          y,
          config.model.options.classes,
          probabilities,
        );
        correct.dispose();
        return loss;
      },
      vars,
      (i, g) => {
        flat[i].set(g.dataSync() as Float32Array);
      },
    );
    loss.dataSync();
    loss.dispose();
    const t2 = clock.nowMs();
    if (s >= warmupSteps) {
      fwd.push(tb - t1);
      bwd.push(t2 - tb);
      overhead.push(t1 - t0);
    }
  }
  return { forwardMs: median(fwd), backwardMs: median(bwd), overheadMs: median(overhead) };
}

/** `measureSteps` on an engine without synchronous reads (webgpu), as its devices run a step: every read awaited. */
async function measureStepsAsync(
  model: Model,
  x: tf.Tensor,
  y: tf.Tensor,
  config: ProfileConfig,
  clock: LayerClock,
  warmupSteps: number,
  steps: number,
) {
  const probabilities = outputsProbabilities(model);
  const vars = model.trainableWeights.map(w => w.read() as tf.Variable);
  const fwd: number[] = [],
    bwd: number[] = [],
    overhead: number[] = [];
  const flat = await Promise.all(vars.map(async v => Float32Array.from((await v.data()) as Float32Array)));
  for (let s = 0; s < warmupSteps + steps; s++) {
    const t0 = clock.nowMs();
    uploadCopies(vars, flat);
    const t1 = clock.nowMs();
    let tb = 0;
    const marker = tf.customGrad(((t: tf.Tensor) => ({
      value: t.clone(),
      gradFunc: (dy: tf.Tensor) => {
        tb = clock.nowMs();
        return dy;
      },
    })) as never) as (t: tf.Tensor) => tf.Tensor;
    const reads = new OrderedReads(tf);
    const loss = backwardWithGradientReady(
      tf,
      () => {
        const { loss, correct } = classificationLoss(
          tf,
          marker(model.apply(x, { training: true }) as tf.Tensor),
          y,
          config.model.options.classes,
          probabilities,
        );
        correct.dispose();
        reads.queue(loss, () => {
          /* the step ends when its loss and every gradient are on the host */
        });
        return loss;
      },
      vars,
      (i, g) => reads.queue(g, values => flat[i].set(values)),
    );
    await reads.done();
    loss.dispose();
    const t2 = clock.nowMs();
    if (s >= warmupSteps) {
      fwd.push(tb - t1);
      bwd.push(t2 - tb);
      overhead.push(t1 - t0);
    }
  }
  return { forwardMs: median(fwd), backwardMs: median(bwd), overheadMs: median(overhead) };
}

/**
 * The variables set from `flat`. The engine uploads later, from the array it is given: a copy, which later reads do not
 * overwrite.
 */
function uploadCopies(vars: tf.Variable[], flat: Float32Array[]): void {
  vars.forEach((v, i) => {
    const t = tf.tensor(flat[i].slice(), v.shape);
    v.assign(t);
    t.dispose();
  });
}

/** Exchange and update throughput of shared memory on this machine (bytes per ms), with the comm side's arithmetic. */
function measureThroughput(
  config: ProfileConfig,
  clock: LayerClock,
): { exchangeBytesPerMs: number; updateBytesPerMs: number } {
  const arithmetic = flatArithmeticFor(config.backend);
  const n = 1 << 20;
  const a = new Float32Array(n).fill(1),
    c = new Float32Array(n).fill(2);
  // as many as the optimizer keeps (centered rmsprop: 3)
  const st = Array.from({ length: optimizerStateSlots(config.optimizer) }, () => new Float32Array(n));
  const tr = clock.nowMs();
  for (let i = 0; i < 5; i++) arithmetic.reduceMeanInto([a, c], a, 0, n);
  const reduceMs = (clock.nowMs() - tr) / 5;
  const tu = clock.nowMs();
  for (let i = 0; i < 5; i++) arithmetic.applyUpdate(config.optimizer, a, c, st, 0, n, i + 1);
  const updateMs = (clock.nowMs() - tu) / 5;
  return { exchangeBytesPerMs: (n * 4) / reduceMs, updateBytesPerMs: (n * 4) / updateMs };
}
