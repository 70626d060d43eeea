/**
 * The precision bench's measurements on its own thread (native backend started): the machine's bf16 and fp32 matmul
 * peak through the addon, a model's training FLOPs per sample, and one device's step split into native kernels and
 * the rest, with the oneDNN implementations the step created.
 */
import * as tf from '@tensorflow/tfjs';
import type { NativeAddon } from '../src/engine/native/native-addon.js';
import { nativeKernelCounts } from '../src/engine/native/native-backend.js';

/** GFLOP/s of a 512×512×512 matmul through the addon, float32 and bf16, one thread (best of 5 runs of 10). */
export function matmulPeak(addon: NativeAddon): { fp32: number; bf16: number } {
  const n = 512,
    a = new Float32Array(n * n).map((_, i) => (i % 7) - 3),
    c = new Float32Array(n * n);
  const rate = (p: 'fp32' | 'bf16') => {
    addon.setPrecision(p);
    addon.matmul(a, a, null, c, 1, 1, n, n, n, false, false, 0, 0);
    let best = Infinity;
    for (let r = 0; r < 5; r++) {
      const t0 = performance.now();
      for (let i = 0; i < 10; i++) addon.matmul(a, a, null, c, 1, 1, n, n, n, false, false, 0, 0);
      best = Math.min(best, (performance.now() - t0) / 10);
    }
    addon.setPrecision('fp32');
    return (2 * n ** 3) / (best / 1000) / 1e9;
  };
  return { fp32: rate('fp32'), bf16: rate('bf16') };
}

const size = (shape: readonly (number | null)[]) => shape.reduce<number>((p, d) => p * (d ?? 1), 1);

/** Multiply-add FLOPs of one sample's training step: forward, input gradient and weight gradient (3× forward). */
export function trainingFlopsPerSample(model: tf.LayersModel): number {
  let forward = 0;
  for (const layer of model.layers) {
    const kind = layer.getClassName();
    const out = layer.outputShape as (number | null)[];
    const kernel = layer.getWeights()[0]?.shape;
    if (!kernel) continue;
    if (kind === 'Conv2D' || kind === 'DepthwiseConv2D') forward += 2 * size(out.slice(1)) * size(kernel.slice(0, 3));
    else if (kind === 'Dense') forward += 2 * size(out.slice(1, -1)) * size(kernel);
  }
  return 3 * forward;
}

export interface StepSplit {
  stepMs: number;
  /** Time inside the native kernels (oneDNN and the addon's loops) per step. */
  kernelMs: number;
  /** The implementation of each primitive this model's steps created. */
  implementations: Record<string, string>;
}

function kernelMs(): number {
  return Object.values(nativeKernelCounts()).reduce((s, c) => s + c.ms, 0);
}

/**
 * One device's forward and backward (softmax cross-entropy; `model` prepared as the native engine trains it) on this
 * thread: the mean of `warm` steps (at least 10) after `warm` untimed.
 */
export function stepSplit(
  addon: NativeAddon,
  model: tf.LayersModel,
  batch: number,
  precision: 'fp32' | 'bf16',
  warm: number,
): StepSplit {
  const known = new Set(Object.keys(addon.implementations()));
  addon.setPrecision(precision);
  const inputShape = (model.inputs[0].shape as number[]).slice(1);
  const x = tf.randomUniform([batch, ...inputShape]);
  const y = tf.oneHot(tf.randomUniform([batch], 0, 10, 'int32'), 10);
  // forward and backward as a device's compute thread runs them (its update runs on the comm thread)
  const loss = () => tf.losses.softmaxCrossEntropy(y, model.apply(x, { training: true }) as tf.Tensor) as tf.Scalar;
  const step = () => tf.tidy(() => tf.dispose(tf.variableGrads(loss).grads));
  for (let i = 0; i < warm; i++) step();
  const k0 = kernelMs(),
    t0 = performance.now();
  const steps = Math.max(10, warm);
  for (let i = 0; i < steps; i++) step();
  const stepMs = (performance.now() - t0) / steps,
    kMs = (kernelMs() - k0) / steps;
  addon.setPrecision('fp32');
  tf.dispose([x, y]);
  const created = Object.entries(addon.implementations()).filter(([key]) => !known.has(key) && key.includes(':bf16|'));
  return { stepMs, kernelMs: kMs, implementations: Object.fromEntries(created) };
}
