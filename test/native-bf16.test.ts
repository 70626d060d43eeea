// Precision bf16 on the native kernels: every convolution and matmul kernel (forward, input gradient, filter
// gradient; regular, depthwise, batched and transposed products) against the same kernel in float32, within the
// bound bf16 rounding allows:
//   |y_bf16 - y_fp32| <= (2^-7 + 2^-16 + 2·K·2^-24) · Σ|a||b|   (elementwise, K the terms of each dot product)
// Each input is rounded to bf16 (8 significant bits: relative error <= u = 2^-8), so each product is off by at most
// 2u + u² = 2^-7 + 2^-16 relatively; a product of two bf16 values is exact in float32, and both sides accumulate K
// terms in float32 (each at most K·2^-24 of Σ|a||b|, in any order). Σ|a||b| is the same kernel run in float32 on the
// inputs' absolute values. The test also checks that bf16 really ran (oneDNN picked a bf16 kernel, and the results
// differ from float32's), and that fp32 is unchanged by having run bf16.
// Skipped when the addon is not built (failed with TANDEM_REQUIRE_NATIVE=1), or when oneDNN has no bf16 kernel here.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { startNativeAndStock, randomInput } from './fixtures/native-compare.js';
import { prng } from '../src/data/synthetic-images.js';
import type { NativeAddon } from '../src/engine/native/native-addon.js';
import { CONV_FILTER_BIAS_KERNEL } from '../src/engine/native/conv-kernels.js';
import { fuseConvLayers } from '../src/engine/native/fused-conv-layers.js';
import { nativeKernelCounts } from '../src/engine/native/native-backend.js';

// The frame, the reversed forward and im2col (native/src/conv.cc) are taken only where oneDNN picks AMX for them; here
// on any bf16 CPU, so that their results are checked on every CPU (test/native-bf16-amx-paths.test.ts checks the
// choice). Read by the addon when it creates a primitive.
process.env.TANDEM_BF16_AMX_PATHS = 'always';
const addon = await startNativeAndStock();
if (addon) {
  const support = addon.bf16Support();
  if (support.implementation === '') t.comment(`skipped: oneDNN ${support.isa} has no bf16 matmul (${support.reason})`);
  else registerTests(addon);
}

type Run = (...xs: tf.Tensor[]) => tf.Tensor[];
interface Case {
  name: string;
  shapes: number[][];
  /** The dot products' length per output of `run` (in its order). */
  terms: number[];
  run: Run;
}

function values(addon: NativeAddon, precision: 'fp32' | 'bf16', inputs: Float32Array[], c: Case): Float32Array[] {
  addon.setPrecision(precision);
  try {
    const outs = tf.tidy(() => c.run(...inputs.map((v, i) => tf.tensor(v, c.shapes[i]))));
    const read = outs.map(o => Float32Array.from(o.dataSync()));
    tf.dispose(outs);
    return read;
  } finally {
    addon.setPrecision('fp32');
  }
}

/** Largest |bf16 - fp32| / bound over the outputs (<= 1 passes), and whether any value differed at all. */
function checkCase(addon: NativeAddon, c: Case, seed: number): { worst: number; differs: boolean } {
  const rand = prng(seed);
  const inputs = c.shapes.map(s => Float32Array.from(randomInput(rand, s).values));
  const fp32 = values(addon, 'fp32', inputs, c);
  const bf16 = values(addon, 'bf16', inputs, c);
  const sums = values(
    addon,
    'fp32',
    inputs.map(v => v.map(Math.abs)),
    c,
  );
  let worst = 0,
    differs = false;
  fp32.forEach((ref, o) => {
    const rel = 2 ** -7 + 2 ** -16 + 2 * c.terms[o] * 2 ** -24;
    for (let i = 0; i < ref.length; i++) {
      const bound = rel * Math.abs(sums[o][i]) * 1.01 + 1e-30;
      worst = Math.max(worst, Math.abs(bf16[o][i] - ref[i]) / bound);
      if (bf16[o][i] !== ref[i]) differs = true;
    }
  });
  return { worst, differs };
}

type Pad = 'same' | 'valid';

/** Conv2D (or depthwise) forward with bias and relu, and both gradients of sum(y · dy). */
function convCase(
  n: number,
  hw: number,
  c: number,
  k: number,
  oc: number,
  stride: number,
  depthwise: boolean,
  pad: Pad = 'same',
): Case {
  const out = Math.ceil((pad === 'same' ? hw : hw - k + 1) / stride);
  const filter = [k, k, c, depthwise ? oc / c : oc];
  const conv = (x: tf.Tensor, w: tf.Tensor) =>
    depthwise
      ? tf.depthwiseConv2d(x as tf.Tensor4D, w as tf.Tensor4D, stride, pad)
      : tf.conv2d(x as tf.Tensor4D, w as tf.Tensor4D, stride, pad);
  return {
    name: `${depthwise ? 'depthwise' : 'conv2d'} x[${n},${hw},${hw},${c}] filter[${filter}] stride ${stride} ${pad}`,
    shapes: [[n, hw, hw, c], filter, [oc], [n, out, out, oc]],
    terms: [k * k * (depthwise ? 1 : c) + 1, k * k * (depthwise ? oc / c : oc), n * out * out],
    run: (x, w, b, dy) => {
      const y = depthwise
        ? tf.relu(tf.add(conv(x, w), b))
        : tf.fused.conv2d({ x: x as tf.Tensor4D, filter: w as tf.Tensor4D, strides: stride, pad, bias: b });
      const [dx, dw] = tf.grads((a: tf.Tensor, f: tf.Tensor) => conv(a, f))([x, w], dy);
      return [y, dx, dw];
    },
  };
}

/**
 * The filter and bias gradients of a convolution in one call (TandemConv2DBackpropFilterBias, the fused layers'
 * gradient in bf16): db = Σ dy over N, H, W, summed in the weight-gradient kernel.
 */
function filterBiasCase(n: number, hw: number, c: number, k: number, oc: number, pad: Pad = 'same'): Case {
  const filterShape = [k, k, c, oc],
    out = pad === 'same' ? hw : hw - k + 1;
  return {
    name: `filter and bias gradients x[${n},${hw},${hw},${c}] filter[${filterShape}] ${pad}`,
    shapes: [
      [n, hw, hw, c],
      [n, out, out, oc],
    ],
    terms: [n * out * out, n * out * out],
    run: (x, dy) =>
      tf
        .engine()
        .runKernel(
          CONV_FILTER_BIAS_KERNEL,
          { x, dy },
          { strides: [1, 1], pad, dataFormat: 'NHWC', filterShape },
        ) as tf.Tensor[],
  };
}

/** A (batched, transposed) matmul and both gradients of sum(c · dc). */
function matmulCase(batch: number[], m: number, k: number, n: number, ta: boolean, tb: boolean): Case {
  const aShape = [...batch, ...(ta ? [k, m] : [m, k])],
    bShape = [...batch, ...(tb ? [n, k] : [k, n])];
  const mm = (a: tf.Tensor, b: tf.Tensor) => tf.matMul(a, b, ta, tb);
  return {
    name: `matMul a[${aShape}] b[${bShape}] tA=${ta} tB=${tb}`,
    shapes: [aShape, bShape, [...batch, m, n]],
    terms: [k, n, m],
    run: (a, b, dc) => [mm(a, b), ...tf.grads(mm)([a, b], dc)],
  };
}

function registerTests(addon: NativeAddon) {
  t.test('every bf16 kernel is within bf16 rounding of float32, and really ran in bf16', t => {
    const cases = [
      convCase(4, 16, 8, 3, 16, 1, false),
      convCase(3, 15, 5, 5, 7, 2, false),
      convCase(2, 9, 64, 1, 32, 1, false),
      // even kernels at stride 1, "same": padding 1 above and 2 below (4×4), 0 and 1 (2×2); the input gradient as a
      // forward convolution with the turned filter, padded 2 and 1, and 1 and 0
      convCase(2, 9, 6, 4, 10, 1, false),
      convCase(3, 8, 16, 2, 16, 1, false),
      convCase(4, 12, 8, 3, 8, 1, true),
      convCase(2, 11, 6, 3, 12, 2, true),
      filterBiasCase(4, 10, 8, 3, 16),
      // one to three input channels: the weight gradient as im2col and matmuls (conv-im2col.cc), by chunks of whole
      // images (~4,096 output pixels; these have a smaller last chunk), at stride 2 with uneven padding
      convCase(4, 16, 3, 3, 16, 1, false),
      convCase(3, 14, 1, 5, 7, 2, false),
      convCase(3, 40, 3, 3, 8, 1, false),
      convCase(5, 31, 2, 3, 9, 2, false),
      filterBiasCase(5, 30, 3, 3, 16),
      filterBiasCase(3, 28, 1, 3, 32),
      // "valid" 3×3 weight gradients of 32 channels or more into outputs up to 10×10: the "same" one over dy framed in
      // zeros (conv.cc's CreateFramedWeights); a wider output, or 16 channels, the "valid" one
      convCase(3, 10, 32, 3, 48, 1, false, 'valid'),
      filterBiasCase(4, 12, 32, 3, 32, 'valid'),
      convCase(2, 14, 32, 3, 32, 1, false, 'valid'),
      convCase(2, 9, 16, 3, 16, 1, false, 'valid'),
      matmulCase([], 32, 300, 64, false, false),
      matmulCase([], 17, 40, 9, true, false),
      matmulCase([3], 8, 50, 12, false, true),
      matmulCase([2], 10, 20, 30, true, true),
    ];
    cases.forEach((c, i) => {
      const { worst, differs } = checkCase(addon, c, 100 + i);
      t.ok(worst <= 1, `${c.name}: worst error ${worst.toFixed(3)} of the bound`);
      t.ok(differs, `${c.name}: bf16 results differ from float32 (the inputs were rounded)`);
    });
    const bf16Kernels = Object.entries(addon.implementations()).filter(([key]) => key.includes(':bf16|'));
    t.ok(bf16Kernels.length >= cases.length, `${bf16Kernels.length} bf16 primitives were created`);
    // key "convK:bf16|N,H,W,C,KH,KW,OC,sh,sw,pt,pl,pb,pr,G|bias"; K 0 forward, 1 input gradient, 2 weight gradient
    const shape = ([key]: [string, string]) => key.split('|')[1].split(',').map(Number);
    // a forward with one input channel runs in float32 by rule (conv.cc); every other kernel in bf16
    const oneChannel = (entry: [string, string]) => entry[0].startsWith('conv0:') && shape(entry)[3] === 1;
    for (const entry of bf16Kernels)
      t.match(entry[1], oneChannel(entry) ? /^f32 by rule/ : /^(?!f32 )/, `${entry[0]} on ${entry[1]}`);
    t.equal(bf16Kernels.filter(oneChannel).length, 2, 'two forwards had one input channel');
    // weight gradients of 1 to 3 channels and 3×3 or smaller (C·KH·KW <= 27): im2col and matmuls
    const weightGradients = bf16Kernels.filter(([key]) => key.startsWith('conv2:'));
    const byIm2col = (entry: [string, string]) => {
      const [, , , c, kh, kw, , , , , , , , g] = shape(entry);
      return g === 1 && c <= 3 && c * kh * kw <= 27;
    };
    t.equal(weightGradients.filter(byIm2col).length, 6, 'six weight gradients had few input channels');
    for (const entry of weightGradients)
      t.equal(entry[1].startsWith('im2col+'), byIm2col(entry), `${entry[0]}: ${entry[1]}`);
    // 3×3 at stride 1, "valid", 32 channels or more in and out, an output up to 10×10 (conv-reversed.cc's
    // SmallValid3x3): the weight gradient over dy framed in zeros, the input gradient reversed
    const smallValid = (entry: [string, string]) => {
      const [, h, w, c, kh, kw, oc, sh, sw, pt, pl, pb, pr, g] = shape(entry);
      const valid = sh === 1 && sw === 1 && pt + pl + pb + pr === 0 && g === 1 && kh === 3 && kw === 3;
      return valid && c >= 32 && oc >= 32 && h - 2 <= 10 && w - 2 <= 10;
    };
    t.equal(weightGradients.filter(smallValid).length, 2, 'two weight gradients were small and "valid"');
    for (const entry of weightGradients)
      t.equal(entry[1].startsWith('framed+'), smallValid(entry), `${entry[0]}: ${entry[1]}`);
    // input gradients at stride 1 whose output is the input's size: the forward convolution of the turned filter
    const inputGradients = bf16Kernels.filter(([key]) => key.startsWith('conv1:'));
    const reversed = (entry: [string, string]) => {
      const [, , , , kh, kw, , sh, sw, pt, pl, pb, pr, g] = shape(entry);
      return (g === 1 && sh === 1 && sw === 1 && pt + pb === kh - 1 && pl + pr === kw - 1) || smallValid(entry);
    };
    t.equal(inputGradients.filter(reversed).length, 7, 'seven input gradients ran as a forward convolution');
    for (const entry of inputGradients)
      t.equal(entry[1].startsWith('reversed forward+'), reversed(entry), `${entry[0]}: ${entry[1]}`);
    t.end();
  });

  t.test('a convolution of one input channel: float32 forward (the same bits), bf16 gradients', t => {
    const x = tf.randomUniform([3, 12, 12, 1], -1, 1, 'float32', 7),
      w = tf.randomUniform([3, 3, 1, 8], -1, 1, 'float32', 8);
    const run = (precision: 'fp32' | 'bf16') => {
      addon.setPrecision(precision);
      try {
        const conv = (a: tf.Tensor, f: tf.Tensor) => tf.conv2d(a as tf.Tensor4D, f as tf.Tensor4D, 1, 'same');
        const loss = (a: tf.Tensor, f: tf.Tensor) => conv(a, f).square();
        const outs = tf.tidy(() => [conv(x, w), ...tf.grads(loss)([x, w])]);
        const read = outs.map(o => o.dataSync() as Float32Array);
        tf.dispose(outs);
        return read;
      } finally {
        addon.setPrecision('fp32');
      }
    };
    const [f32, bf16] = [run('fp32'), run('bf16')];
    t.same(bf16[0], f32[0], 'the forward gives float32 bits');
    t.not(bf16[2].join(), f32[2].join(), 'the filter gradient ran in bf16');
    tf.dispose([x, w]);
    t.end();
  });

  t.test("a fused Conv2D layer's bias gradient: from the filter gradient's call in bf16, tfjs's Sum in fp32", t => {
    const model = tf.sequential({
      layers: [
        tf.layers.conv2d({
          inputShape: [10, 10, 4],
          filters: 8,
          kernelSize: 3,
          padding: 'same',
          activation: 'relu',
          biasInitializer: 'ones',
          kernelInitializer: tf.initializers.glorotUniform({ seed: 3 }),
        }),
        tf.layers.flatten(),
        tf.layers.dense({ units: 3, kernelInitializer: tf.initializers.glorotUniform({ seed: 4 }) }),
      ],
    });
    fuseConvLayers(tf, model);
    const x = tf.randomUniform([4, 10, 10, 4], -1, 1, 'float32', 5),
      y = tf.oneHot(tf.tensor1d([0, 1, 2, 1], 'int32'), 3);
    const gradients = (precision: 'fp32' | 'bf16') => {
      addon.setPrecision(precision);
      const before = nativeKernelCounts()[CONV_FILTER_BIAS_KERNEL]?.native ?? 0;
      const variables = model.trainableWeights.map(w => w.read() as tf.Variable);
      const { grads } = tf.variableGrads(
        () => tf.losses.softmaxCrossEntropy(y, model.apply(x, { training: true }) as tf.Tensor) as tf.Scalar,
        variables,
      );
      const values = Float32Array.from(grads[variables[1].name].dataSync()); // the convolution's bias
      tf.dispose(Object.values(grads));
      addon.setPrecision('fp32');
      return { values, calls: (nativeKernelCounts()[CONV_FILTER_BIAS_KERNEL]?.native ?? 0) - before };
    };
    const fp32 = gradients('fp32'),
      bf16 = gradients('bf16');
    t.equal(fp32.calls, 0, 'fp32: tfjs Sum, not the combined call');
    t.equal(bf16.calls, 1, 'bf16: one combined call');
    const scale = Math.max(...fp32.values.map(Math.abs));
    const worst = Math.max(...fp32.values.map((v, i) => Math.abs(v - bf16.values[i])));
    t.ok(scale > 0 && worst <= 0.02 * scale, `bias gradient within 2% of fp32's largest (${worst} of ${scale})`);
    t.equal(fp32.values.length, 8, 'the bias gradient has a value per filter');
    tf.dispose([x, y]);
    model.dispose();
    t.end();
  });

  t.test('float32 is the same bits before and after bf16 ran (separate primitives per precision)', t => {
    const c = convCase(2, 8, 4, 3, 8, 1, false);
    const inputs = c.shapes.map(s => Float32Array.from(randomInput(prng(7), s).values));
    const before = values(addon, 'fp32', inputs, c);
    values(addon, 'bf16', inputs, c);
    const after = values(addon, 'fp32', inputs, c);
    before.forEach((v, i) => t.same(after[i], v, `output ${i}`));
    t.equal(addon.getPrecision(), 'fp32');
    t.throws(() => addon.setPrecision('fp16' as 'bf16'), /precision must be 'fp32' or 'bf16'/);
    t.end();
  });
}
