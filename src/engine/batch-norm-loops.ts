/**
 * The five loops of BatchNormalization in training (src/model/batch-norm-training.ts), twice: in JS, the reference, and
 * in the
 * native addon (native/src/batch-norm.cc), which gives the same bits (test/batch-norm-training.test.ts compares them)
 * ~20× faster — the JS loops were half of resnet-mini's step. The addon's loops run wherever it loaded, whatever the
 * engine: they only read and write Float32Arrays.
 *
 * A tensor is seen as [outer, channels, inner]: element (o, c, i) is at (o·C + c)·inner + i. Sums are in double;
 * where tfjs rounds to float32, so do the loops.
 */
import { loadNativeAddon, type NativeAddon } from './native/native-addon.js';
import { OUTPUT_POOL } from './native/output-pool.js';
import { outputShadow } from './native/bf16-shadows.js';

/** [outer, channels, inner]: element (o, c, i) is at (o·C + c)·inner + i. */
export interface ChannelGeometry {
  outer: number;
  channels: number;
  inner: number;
}

export interface BatchNormLoops {
  name: 'js' | 'native';
  /** Σx per channel. */
  channelSums(x: Float32Array, g: ChannelGeometry): Float64Array;
  /** Σ(x − mean)² per channel, each difference and square rounded to float32 as tfjs computes them. */
  centeredSquareSums(x: Float32Array, mean: Float32Array, g: ChannelGeometry): Float64Array;
  /** y = β + (x − mean)·scale, per channel; `relu`: relu(y) (the relu layer after it, fused in). */
  normalize(
    x: Float32Array,
    mean: Float32Array,
    scale: Float64Array,
    beta: Float32Array,
    g: ChannelGeometry,
    relu?: boolean,
  ): Float32Array;
  /**
   * [Σdy, Σdy·x̂] per channel (2·C values), x̂ = (x − mean)·invStd. `z`: a fused relu's output; dy is then the relu's
   * output gradient, taken through relu's derivative first (as inputGradient does).
   */
  gradientSums(
    dy: Float32Array,
    x: Float32Array,
    mean: Float32Array,
    invStd: Float64Array,
    g: ChannelGeometry,
    z?: Float32Array,
  ): Float64Array;
  /**
   * dx = γ·invStd·(dy − meanDy − x̂·meanDyXHat), the means over the (global) batch of n from `sums` ([Σdy, Σdy·x̂]).
   */
  inputGradient(
    dy: Float32Array,
    x: Float32Array,
    mean: Float32Array,
    invStd: Float64Array,
    gamma: Float32Array,
    sums: Float32Array,
    n: number,
    g: ChannelGeometry,
    z?: Float32Array,
  ): Float32Array;
}

/** relu as the native Relu kernel computes it: NaN stays NaN, -0 becomes 0. */
function relu(v: number): number {
  return v > 0 || v !== v ? v : 0;
}

/** dy times relu's derivative read from relu's output z (> 0 where its input is, NaN where it is NaN), as float32. */
function throughRelu(dy: number, z: number): number {
  return Math.fround(dy * (z !== z ? z : z > 0 ? 1 : 0));
}

// The loops below are written out (no per-element callbacks): V8 does not inline a callback
// that several call sites share, and a call per element costs more than the arithmetic.

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

function normalize(
  x: Float32Array,
  mean: Float32Array,
  scale: Float64Array,
  beta: Float32Array,
  g: ChannelGeometry,
  fusedRelu = false,
): Float32Array {
  const y = new Float32Array(x.length);
  for (let o = 0, i = 0; o < g.outer; o++) {
    for (let c = 0; c < g.channels; c++) {
      const m = mean[c],
        k = scale[c],
        b = beta[c];
      if (fusedRelu) for (const end = i + g.inner; i < end; i++) y[i] = relu(Math.fround(b + (x[i] - m) * k));
      else for (const end = i + g.inner; i < end; i++) y[i] = b + (x[i] - m) * k;
    }
  }
  return y;
}

function gradientSums(
  dy: Float32Array,
  x: Float32Array,
  mean: Float32Array,
  invStd: Float64Array,
  g: ChannelGeometry,
  z?: Float32Array,
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
        const d = z ? throughRelu(dy[i], z[i]) : dy[i];
        sDy += d;
        sDyXHat += d * (x[i] - m) * k;
      }
      sums[c] += sDy;
      sums[C + c] += sDyXHat;
    }
  }
  return sums;
}

const inputGradient: BatchNormLoops['inputGradient'] = (dy, x, mean, invStd, gamma, sums, n, g, z) => {
  const C = g.channels,
    dx = new Float32Array(x.length);
  for (let o = 0, i = 0; o < g.outer; o++) {
    for (let c = 0; c < C; c++) {
      const m = mean[c],
        k = invStd[c],
        scale = gamma[c] * k,
        meanDy = sums[c] / n,
        meanDyXHat = sums[C + c] / n;
      for (const end = i + g.inner; i < end; i++) {
        const d = z ? throughRelu(dy[i], z[i]) : dy[i];
        dx[i] = scale * (d - meanDy - (x[i] - m) * k * meanDyXHat);
      }
    }
  }
  return dx;
};

export const JS_BATCH_NORM_LOOPS: BatchNormLoops = {
  name: 'js',
  channelSums,
  centeredSquareSums,
  normalize,
  gradientSums,
  inputGradient,
};

/**
 * A fresh output (recycled once its tensor is dropped) that `write` fills whole. Under precision bf16 it writes the
 * output's bf16 shadow in the same pass (inputGradient: the convolution before the layer reads dx's, where it would
 * cast the whole activation again). Not normalize: its y is read by the relu's gradient and the adds of a residual
 * block too, and writing its shadow cost more than the convolution after it saved (resnet-mini: +0.42 ms in
 * normalize, −0.24 ms in the convolutions, three pairs).
 */
function written(addon: NativeAddon, length: number, write: (out: Float32Array, shadow: Uint16Array | null) => void) {
  const out = OUTPUT_POOL.take(length, false);
  const shadow = outputShadow({ addon }, out);
  write(out, shadow?.bits ?? null);
  if (shadow) shadow.filled = true;
  return out;
}

/**
 * The addon's loops (the caller checked that it loaded). Under precision bf16, channels last, channelSums also sums the
 * squares in the same pass, and centeredSquareSums follows from the two sums with no pass over x of its own (the
 * statistics in double, more precise than tfjs's float32 differences, not its bits); resnet-mini's two statistics
 * passes 1.03 → 0.75 ms a step. In fp32, and for another channel axis, tfjs's two passes and bits.
 */
export function nativeBatchNormLoops(addon: NativeAddon): BatchNormLoops {
  let moments: { x: Float32Array; sums: Float64Array } | undefined; // [Σx, Σx²] of the last one-pass channelSums
  return {
    name: 'native',
    channelSums: (x, g) => {
      moments = undefined; // the sums below are x's, whatever an earlier call left
      if (g.inner === 1 && addon.getPrecision() === 'bf16') {
        moments = { x, sums: new Float64Array(2 * g.channels) };
        addon.bnChannelMoments(x, g.outer, g.channels, g.inner, moments.sums);
        return moments.sums.slice(0, g.channels);
      }
      const sums = new Float64Array(g.channels);
      addon.bnChannelSums(x, g.outer, g.channels, g.inner, sums);
      return sums;
    },
    centeredSquareSums: (x, mean, g) => {
      const C = g.channels,
        sums = new Float64Array(C);
      if (moments?.x === x) {
        // Σ(x − m)² = Σx² − 2m·Σx + n·m², in double, from the one pass channelSums made (never below 0: a constant
        // channel may round a hair under it)
        const s = moments.sums,
          n = g.outer * g.inner;
        for (let c = 0; c < C; c++) sums[c] = Math.max(0, s[C + c] - 2 * mean[c] * s[c] + n * mean[c] * mean[c]);
        moments = undefined;
        return sums;
      }
      addon.bnCenteredSquareSums(x, mean, g.outer, C, g.inner, sums);
      return sums;
    },
    normalize: (x, mean, scale, beta, g, relu = false) => {
      const y = OUTPUT_POOL.take(x.length, false); // written whole; recycled once its tensor is dropped
      addon.bnNormalize(x, mean, scale, beta, g.outer, g.channels, g.inner, y, relu);
      return y;
    },
    gradientSums: (dy, x, mean, invStd, g, z) => {
      const sums = new Float64Array(2 * g.channels);
      addon.bnGradientSums(dy, x, mean, invStd, g.outer, g.channels, g.inner, sums, z ?? null);
      return sums;
    },
    inputGradient: (dy, x, mean, invStd, gamma, sums, n, g, z) =>
      written(addon, x.length, (dx, dxs) =>
        addon.bnInputGradient(dy, x, mean, invStd, gamma, sums, n, g.outer, g.channels, g.inner, dx, z ?? null, dxs),
      ),
  };
}

let chosen: BatchNormLoops | undefined;

/** The addon's loops when it loaded in this thread, else the JS ones. */
export function batchNormLoops(): BatchNormLoops {
  if (chosen) return chosen;
  const load = loadNativeAddon();
  return (chosen = load.loaded ? nativeBatchNormLoops(load.addon) : JS_BATCH_NORM_LOOPS);
}
