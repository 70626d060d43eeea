// tandem's kernels for the slow layers give the bits of tfjs's own cpu kernels: the Embedding
// gradient (UnsortedSegmentSum in one pass) on random shapes, repeated and out-of-range ids; the
// depthwise filter and input gradients on strides, paddings and channel multipliers; and they are
// what the engines run after startBackend.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { segmentSum } from '../src/engine/fast-gradients.js';
import {
  DEPTHWISE_GRADIENT_KERNELS,
  depthwiseFilterGradient,
  depthwiseInputGradient,
} from '../src/engine/depthwise-gradient-kernels.js';
import { startBackend } from '../src/engine/backend.js';
import { prng } from '../src/data/synthetic-images.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';

let stockSegmentSum: unknown;
/** tfjs's own MaxPoolGrad on cpu, taken before any test installs tandem's kernels on this thread. */
const stockMaxPoolGrad = tf.getKernel('MaxPoolGrad', 'cpu')!.kernelFunc;

t.test("one pass = tfjs's stock cpu kernel, bit for bit", async t => {
  await tf.setBackend('cpu'); // stock: tandem's kernel is not installed on this engine yet
  const stock = tf.getKernel('UnsortedSegmentSum', 'cpu')!;
  stockSegmentSum = stock.kernelFunc;
  const r = prng(5);
  for (const [n, row, segments] of [
    [1, 1, 1],
    [7, 3, 4],
    [64, 16, 50],
    [200, 5, 9],
  ]) {
    const x = Float32Array.from({ length: n * row }, () => (r() - 0.5) * 1e3);
    // -1 and `segments`: out of range
    const ids = Int32Array.from({ length: n }, () => Math.floor(r() * (segments + 2)) - 1);
    const want = tf.tidy(() =>
      (
        tf
          .engine()
          .runKernel(
            'UnsortedSegmentSum',
            { x: tf.tensor(x, [n, row]), segmentIds: tf.tensor1d(ids, 'int32') },
            { numSegments: segments },
          ) as tf.Tensor
      ).dataSync(),
    );
    const got = new Float32Array(segments * row);
    segmentSum(x, ids, segments, row, got);
    t.same(Array.from(got), Array.from(want), `${n} rows of ${row} into ${segments} segments`);
  }
  t.ok(stock, 'tfjs has a stock kernel to compare with');
});

t.test(
  "the depthwise filter and input gradients = tfjs's stock cpu kernels, bit for bit, on cpu and wasm (native: " +
    'oneDNN, native-kernels.test)',
  async t => {
    await tf.setBackend('cpu');
    const stockKernels = DEPTHWISE_GRADIENT_KERNELS.map(name => tf.getKernel(name, 'cpu')!.kernelFunc);
    const engines = ['cpu', 'wasm'] as const;
    type Shape4 = [number, number, number, number];
    const cases: [Shape4, Shape4, number, 'same' | 'valid'][] = [
      [[2, 7, 7, 3], [3, 3, 3, 1], 1, 'same'],
      [[2, 8, 8, 4], [3, 3, 4, 2], 2, 'same'],
      [[1, 9, 6, 2], [5, 3, 2, 3], 2, 'valid'],
      [[3, 4, 4, 5], [1, 1, 5, 1], 1, 'valid'],
    ];
    const gradients = (
      x: tf.Tensor,
      w: tf.Tensor,
      dy: tf.Tensor,
      xs: Shape4,
      ws: Shape4,
      stride: number,
      pad: 'same' | 'valid',
    ) =>
      tf.tidy(
        () =>
          [
            (
              tf
                .engine()
                .runKernel(
                  'DepthwiseConv2dNativeBackpropFilter',
                  { x, dy },
                  { strides: stride, pad, dilations: 1, filterShape: ws },
                ) as tf.Tensor
            )
              .dataSync()
              .slice(),
            (
              tf
                .engine()
                .runKernel(
                  'DepthwiseConv2dNativeBackpropInput',
                  { dy, filter: w },
                  { strides: stride, pad, dilations: 1, inputShape: xs },
                ) as tf.Tensor
            )
              .dataSync()
              .slice(),
          ] as Float32Array[],
      );
    const inputs = cases.map(([xs, ws, stride, pad], i) => {
      const x = tf.randomUniform(xs, -1, 1, 'float32', i + 1),
        w = tf.randomUniform(ws, -1, 1, 'float32', i + 21);
      const y = tf.depthwiseConv2d(x as tf.Tensor4D, w as tf.Tensor4D, stride, pad);
      const dy = tf.randomUniform(y.shape, -1, 1, 'float32', i + 11);
      y.dispose();
      // tfjs's own (tandem's are not installed on this engine yet)
      const stock = gradients(x, w, dy, xs, ws, stride, pad);
      return {
        x: x.dataSync().slice(),
        w: w.dataSync().slice(),
        dy: dy.dataSync().slice(),
        xs,
        dys: dy.shape,
        ws,
        stride,
        pad,
        stock,
      };
    });
    for (const engine of engines) {
      await startBackend(tf, engine);
      for (const c of inputs) {
        const [dW, dx] = gradients(
          tf.tensor(c.x, c.xs),
          tf.tensor(c.w, c.ws),
          tf.tensor(c.dy, c.dys),
          c.xs,
          c.ws,
          c.stride,
          c.pad,
        );
        const name = `${engine}: x ${c.xs.join('x')}, filter ${c.ws.join('x')}, stride ${c.stride}, ${c.pad}`;
        t.same(Array.from(dW), Array.from(c.stock[0]), `${name}: filter gradient`);
        t.same(Array.from(dx), Array.from(c.stock[1]), `${name}: input gradient`);
      }
    }
    DEPTHWISE_GRADIENT_KERNELS.forEach((name, i) =>
      t.not(
        tf.getKernel(name, 'cpu')!.kernelFunc,
        stockKernels[i],
        `the cpu engine runs tandem's ${name}, not the stock one`,
      ),
    );
    const geometry = {
      batch: 2,
      inHeight: 7,
      inWidth: 7,
      inChannels: 3,
      outHeight: 7,
      outWidth: 7,
      outChannels: 3,
      filterHeight: 3,
      filterWidth: 3,
      strideHeight: 1,
      strideWidth: 1,
      top: 1,
      left: 1,
    };
    t.same(
      Array.from(depthwiseFilterGradient(inputs[0].x, inputs[0].dy, geometry)),
      Array.from(inputs[0].stock[0]),
      'the filter loops themselves, called directly',
    );
    t.same(
      Array.from(depthwiseInputGradient(inputs[0].dy, inputs[0].w, geometry)),
      Array.from(inputs[0].stock[1]),
      'the input loops themselves, called directly',
    );
  },
);

t.test('every engine runs the one-pass kernel and gets the stock answer', async t => {
  const engines = ['cpu', 'wasm', ...(loadNativeAddon().loaded ? ['native'] : [])];
  const x = tf.tidy(() => tf.randomUniform([300, 8], -1, 1, 'float32', 3));
  const values = x.dataSync().slice();
  x.dispose();
  const ids = Int32Array.from({ length: 300 }, (_, i) => (i * 37) % 120);
  const want = new Float32Array(120 * 8);
  segmentSum(values, ids, 120, 8, want);
  for (const engine of engines) {
    await startBackend(tf, engine);
    const got = tf.tidy(() =>
      tf.unsortedSegmentSum(tf.tensor(values, [300, 8]), tf.tensor1d(ids, 'int32'), 120).dataSync(),
    );
    t.same(Array.from(got), Array.from(want), `${engine}: the same bits`);
  }
  t.not(
    tf.getKernel('UnsortedSegmentSum', 'cpu')!.kernelFunc,
    stockSegmentSum,
    "the cpu engine runs tandem's kernel, not the stock one",
  );
});

t.test(
  "MaxPoolGrad = tfjs's stock cpu kernel, bit for bit, on cpu and wasm: ties, overlapping windows, strides, paddings",
  async t => {
    await tf.setBackend('cpu');
    type Shape4 = [number, number, number, number];
    const cases: [Shape4, number, number, 'same' | 'valid' | number][] = [
      [[2, 7, 7, 3], 3, 1, 'same'],
      [[2, 8, 8, 4], 3, 2, 'same'],
      [[1, 9, 6, 2], 2, 2, 'valid'],
      [[3, 5, 5, 5], 3, 2, 'valid'],
      [[2, 6, 6, 2], 3, 1, 1],
    ];
    const r = prng(31);
    const attrsOf = (filterSize: number, strides: number, pad: 'same' | 'valid' | number) => ({
      filterSize,
      strides,
      pad,
      ...(typeof pad === 'number' ? { dimRoundingMode: 'floor' } : {}),
    });
    const gradientOf = (
      x: tf.Tensor,
      dy: tf.Tensor,
      y: tf.Tensor,
      filterSize: number,
      strides: number,
      pad: 'same' | 'valid' | number,
    ) =>
      tf.tidy(() =>
        (
          tf
            .engine()
            .runKernel('MaxPoolGrad', { dy, input: x, output: y }, attrsOf(filterSize, strides, pad)) as tf.Tensor
        )
          .dataSync()
          .slice(),
      );
    const stockGradientOf = (
      x: tf.Tensor,
      dy: tf.Tensor,
      y: tf.Tensor,
      filterSize: number,
      strides: number,
      pad: 'same' | 'valid' | number,
    ) => {
      const out = stockMaxPoolGrad({
        inputs: { dy, input: x, output: y },
        backend: tf.backend(),
        attrs: attrsOf(filterSize, strides, pad),
      }) as tf.TensorInfo;
      return (tf.backend().readSync(out.dataId) as Float32Array).slice();
    };
    const inputs = cases.map(([xs, filterSize, strides, pad]) => {
      // small integers: many tied maxima, as after a ReLU
      const x = Float32Array.from({ length: xs.reduce((a, b) => a * b, 1) }, () =>
        Math.max(0, Math.floor(r() * 5) - 2),
      );
      const y = tf.maxPool(
        tf.tensor(x, xs) as tf.Tensor4D,
        filterSize,
        strides,
        pad,
        typeof pad === 'number' ? 'floor' : undefined,
      );
      const dy = Float32Array.from({ length: y.size }, () => r() * 2 - 1);
      // tfjs's kernel, called directly
      const stock = stockGradientOf(tf.tensor(x, xs), tf.tensor(dy, y.shape), y, filterSize, strides, pad);
      return { x, xs, dy, ys: y.shape, filterSize, strides, pad, stock };
    });
    for (const engine of ['cpu', 'wasm'] as const) {
      await startBackend(tf, engine);
      for (const c of inputs) {
        const y = tf.maxPool(
          tf.tensor(c.x, c.xs) as tf.Tensor4D,
          c.filterSize,
          c.strides,
          c.pad,
          typeof c.pad === 'number' ? 'floor' : undefined,
        );
        const got = gradientOf(tf.tensor(c.x, c.xs), tf.tensor(c.dy, c.ys), y, c.filterSize, c.strides, c.pad);
        t.same(
          Array.from(got),
          Array.from(c.stock),
          `${engine}: x ${c.xs.join('x')}, pool ${c.filterSize} stride ${c.strides} pad ${c.pad}`,
        );
      }
    }
    t.not(
      tf.getKernel('MaxPoolGrad', 'cpu')!.kernelFunc,
      stockMaxPoolGrad,
      "the cpu engine runs tandem's kernel, not the stock one",
    );
  },
);
