/**
 * BatchNormalization in training on arrays: the statistics and normalisation forward, the gradients backward, with a
 * collective's all-reduces at their places (sync BatchNormalization). The one sequence both paths run: tfjs's
 * customGrad closures (batch-norm-training.ts, every engine) and the kernels a step's replay records
 * (batch-norm-kernels.ts, the native engine), so that the two give the same bits and cannot drift apart.
 */
import type { BlockingCollective } from '../collectives/collective.js';
import { batchNormLoops, type ChannelGeometry } from '../engine/batch-norm-loops.js';

export function geometryOf(shape: readonly number[], axis: number): ChannelGeometry {
  const a = axis >= 0 ? axis : axis + shape.length;
  const prod = (dims: readonly number[]) => dims.reduce((p, d) => p * d, 1);
  return { outer: prod(shape.slice(0, a)), channels: shape[a], inner: prod(shape.slice(a + 1)) };
}

/** Σ over the devices of `local` (in place) when there is a collective. */
export function reduced(local: Float32Array, collective: BlockingCollective | undefined): Float32Array {
  collective?.allReduce(local, 0, local.length, 'sum');
  return local;
}

/** 1/√(var + ε) per channel, in double: the forward's and the gradient's (the same bits from the same variance). */
export function inverseStd(variance: Float32Array, epsilon: number): Float64Array {
  return Float64Array.from(variance, v => 1 / Math.sqrt(v + epsilon));
}

/** A forward's results: y, and the (global) batch's mean, biased variance, their inverse std and sample count. */
export interface BatchStatistics {
  y: Float32Array;
  mean: Float32Array;
  variance: Float32Array;
  invStd: Float64Array;
  n: number;
}

/**
 * Forward on x's values `xv` (geometry `g`) with γ `gv` and β `bv`: Σx and the count, all-reduced; the mean; Σ(x −
 * mean)², all-reduced; the variance; y = β + (x − mean)·γ/√(var + ε), relu'd when `relu`.
 */
export function statistics(
  xv: Float32Array,
  gv: Float32Array,
  bv: Float32Array,
  g: ChannelGeometry,
  epsilon: number,
  relu: boolean,
  collective: BlockingCollective | undefined,
): BatchStatistics {
  const C = g.channels;
  const { channelSums, centeredSquareSums, normalize } = batchNormLoops();
  const sums = new Float32Array(C + 1);
  sums.set(channelSums(xv, g));
  sums[C] = g.outer * g.inner;
  reduced(sums, collective);
  const n = sums[C];
  const mean = Float32Array.from(sums.subarray(0, C), s => s / n);
  const squares = Float32Array.from(centeredSquareSums(xv, mean, g));
  const variance = Float32Array.from(reduced(squares, collective), s => s / n);
  const invStd = inverseStd(variance, epsilon);
  const y = normalize(
    xv,
    mean,
    Float64Array.from(invStd, (k, c) => gv[c] * k),
    bv,
    g,
    relu,
  );
  return { y, mean, variance, invStd, n };
}

/** dx, dγ and dβ: this device's [Σdy, Σdy·x̂], all-reduced for dx; dγ and dβ are this device's own sums. */
export function gradients(
  dy: Float32Array,
  xs: Float32Array,
  gv: Float32Array,
  forward: Pick<BatchStatistics, 'mean' | 'invStd' | 'n'>,
  g: ChannelGeometry,
  z: Float32Array | undefined,
  collective: BlockingCollective | undefined,
): { dx: Float32Array; dGamma: Float32Array; dBeta: Float32Array } {
  const C = g.channels;
  const { mean, invStd, n } = forward;
  const { gradientSums, inputGradient } = batchNormLoops();
  const local = gradientSums(dy, xs, mean, invStd, g, z);
  const global = reduced(Float32Array.from(local), collective);
  const dx = inputGradient(dy, xs, mean, invStd, gv, global, n, g, z);
  return { dx, dGamma: Float32Array.from(local.subarray(C)), dBeta: Float32Array.from(local.subarray(0, C)) };
}
