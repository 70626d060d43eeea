/**
 * BatchNormalization in training as flat loops over the tensor's values: the
 * per-channel statistics, the normalisation, and the gradient in two passes —
 * where tfjs composes moments, broadcasting arithmetic and their gradients
 * from a dozen kernels (on the cpu-based engines each walks its indices
 * through generic broadcasting: ~70 ms forward and ~250 ms backward at a
 * 32x16x16x32 activation; a few ms here). Same formulas as tfjs: the mean, the
 * biased variance mean((x − mean)²) with squares rounded to float32,
 * y = β + (x − mean)·γ / √(var + ε) in double; sums in double.
 *
 * With a `collective`, the statistics are those of the global batch (sync
 * BatchNormalization): Σx and the count, then Σ(x − mean)², then in backward
 * Σdy and Σdy·x̂ are all-reduced (blocking: inside tfjs's synchronous forward
 * and backward), and dx is the gradient of the sum of every device's loss.
 * γ and β get this device's own sums, which the gradient pipeline averages
 * like every other gradient. Without one, the batch is this device's.
 *
 * @example
 * const { y, mean, variance } = batchNormTraining(tf, x, gamma, beta, { axis: -1, epsilon: 1e-3 });
 */
import type { BlockingCollective } from '../collectives/collective.js';
import type { Tensor, Tf } from '../engine/tfjs-types.js';

export interface BatchNormTrainingOptions {
  /** The channel axis (negative counts from the end). */
  axis: number;
  epsilon: number;
  /** All-reduces the statistics over the devices (sync mode); absent: this device's batch only. */
  collective?: BlockingCollective;
}

export interface BatchNormTrainingResult {
  y: Tensor;
  /** The batch mean and biased variance per channel (global with a collective), for the moving statistics. */
  mean: Tensor;
  variance: Tensor;
}

/** [outer, channels, inner]: element (o, c, i) is at (o·C + c)·inner + i. */
interface ChannelGeometry {
  outer: number;
  channels: number;
  inner: number;
}

function geometryOf(shape: number[], axis: number): ChannelGeometry {
  const a = axis >= 0 ? axis : axis + shape.length;
  const prod = (dims: number[]) => dims.reduce((p, d) => p * d, 1);
  return { outer: prod(shape.slice(0, a)), channels: shape[a], inner: prod(shape.slice(a + 1)) };
}

// The loops below are written out (no per-element callbacks): V8 does not inline a callback
// that several call sites share, and a call per element costs more than the arithmetic.

/** Σx per channel, in double. */
function channelSums(x: Float32Array, g: ChannelGeometry): Float64Array {
  const sums = new Float64Array(g.channels);
  for (let o = 0, i = 0; o < g.outer; o++) {
    for (let c = 0; c < g.channels; c++) {
      let s = 0;
      for (const end = i + g.inner; i < end; i++) s += x[i];
      sums[c] += s;
    }
  }
  return sums;
}

/** Σ(x − mean)² per channel, each difference and square rounded to float32 as tfjs computes them, summed in double. */
function centeredSquareSums(x: Float32Array, mean: Float32Array, g: ChannelGeometry): Float64Array {
  const sums = new Float64Array(g.channels);
  for (let o = 0, i = 0; o < g.outer; o++) {
    for (let c = 0; c < g.channels; c++) {
      const m = mean[c];
      let s = 0;
      for (const end = i + g.inner; i < end; i++) {
        const d = Math.fround(x[i] - m);
        s += Math.fround(d * d);
      }
      sums[c] += s;
    }
  }
  return sums;
}

/** y = β + (x − mean)·γ·invStd, per channel. */
function normalize(
  x: Float32Array,
  mean: Float32Array,
  scale: Float64Array,
  beta: Float32Array,
  g: ChannelGeometry,
): Float32Array {
  const y = new Float32Array(x.length);
  for (let o = 0, i = 0; o < g.outer; o++) {
    for (let c = 0; c < g.channels; c++) {
      const m = mean[c],
        k = scale[c],
        b = beta[c];
      for (const end = i + g.inner; i < end; i++) y[i] = b + (x[i] - m) * k;
    }
  }
  return y;
}

/** [Σdy, Σdy·x̂] per channel (2·C values), x̂ = (x − mean)·invStd. */
function gradientSums(
  dy: Float32Array,
  x: Float32Array,
  mean: Float32Array,
  invStd: Float64Array,
  g: ChannelGeometry,
): Float64Array {
  const C = g.channels,
    sums = new Float64Array(2 * C);
  for (let o = 0, i = 0; o < g.outer; o++) {
    for (let c = 0; c < C; c++) {
      const m = mean[c],
        k = invStd[c];
      let sDy = 0,
        sDyXHat = 0;
      for (const end = i + g.inner; i < end; i++) {
        sDy += dy[i];
        sDyXHat += dy[i] * (x[i] - m) * k;
      }
      sums[c] += sDy;
      sums[C + c] += sDyXHat;
    }
  }
  return sums;
}

/** dx = γ·invStd·(dy − meanDy − x̂·meanDyXHat), with the means over the (global) batch of n. */
function inputGradient(
  dy: Float32Array,
  x: Float32Array,
  mean: Float32Array,
  invStd: Float64Array,
  gamma: Float32Array,
  sums: Float32Array,
  n: number,
  g: ChannelGeometry,
): Float32Array {
  const C = g.channels,
    dx = new Float32Array(x.length);
  for (let o = 0, i = 0; o < g.outer; o++) {
    for (let c = 0; c < C; c++) {
      const m = mean[c],
        k = invStd[c],
        scale = gamma[c] * k,
        meanDy = sums[c] / n,
        meanDyXHat = sums[C + c] / n;
      for (const end = i + g.inner; i < end; i++) dx[i] = scale * (dy[i] - meanDy - (x[i] - m) * k * meanDyXHat);
    }
  }
  return dx;
}

/** Σ over the devices of `local` (in place) when there is a collective. */
function reduced(local: Float32Array, collective: BlockingCollective | undefined): Float32Array {
  collective?.allReduce(local, 0, local.length, 'sum');
  return local;
}

/** y, the batch mean and the batch variance of x (any rank, any channel axis), with tfjs's gradients for x, γ and β. */
export function batchNormTraining(
  tf: Tf,
  x: Tensor,
  gamma: Tensor,
  beta: Tensor,
  options: BatchNormTrainingOptions,
): BatchNormTrainingResult {
  const g = geometryOf(x.shape, options.axis);
  const C = g.channels;
  let mean = new Float32Array(C),
    variance = new Float32Array(C);
  const op = tf.customGrad(((xIn: Tensor, gammaIn: Tensor, betaIn: Tensor) => {
    const xv = xIn.dataSync() as Float32Array,
      gv = gammaIn.dataSync() as Float32Array,
      bv = betaIn.dataSync() as Float32Array;
    const sums = new Float32Array(C + 1);
    sums.set(channelSums(xv, g));
    sums[C] = g.outer * g.inner;
    reduced(sums, options.collective);
    const n = sums[C];
    mean = Float32Array.from(sums.subarray(0, C), s => s / n);
    const squares = Float32Array.from(centeredSquareSums(xv, mean, g));
    variance = Float32Array.from(reduced(squares, options.collective), s => s / n);
    const invStd = Float64Array.from(variance, v => 1 / Math.sqrt(v + options.epsilon));
    const y = normalize(
      xv,
      mean,
      Float64Array.from(invStd, (k, c) => gv[c] * k),
      bv,
      g,
    );
    return {
      value: tf.tensor(y, x.shape, 'float32'),
      gradFunc: (dy: Tensor) => {
        const dyv = dy.dataSync() as Float32Array;
        const local = gradientSums(dyv, xv, mean, invStd, g);
        const global = reduced(Float32Array.from(local), options.collective);
        const dx = inputGradient(dyv, xv, mean, invStd, gv, global, n, g);
        return [
          tf.tensor(dx, x.shape, 'float32'),
          tf.tensor(Float32Array.from(local.subarray(C)), [C]),
          tf.tensor(Float32Array.from(local.subarray(0, C)), [C]),
        ];
      },
    };
  }) as never) as (x: Tensor, gamma: Tensor, beta: Tensor) => Tensor;
  const y = op(x, gamma, beta);
  return { y, mean: tf.tensor1d(mean), variance: tf.tensor1d(variance) };
}
