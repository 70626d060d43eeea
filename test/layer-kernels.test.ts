// tandem's kernels for the slow layers give the bits of tfjs's own cpu kernels: the Embedding
// gradient (UnsortedSegmentSum in one pass) on random shapes, repeated and out-of-range ids; the
// depthwise filter gradient on strides, paddings and channel multipliers; and they are what the
// cpu, native and wasm engines run after startBackend.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { segmentSum } from '../src/engine/fast-gradients.js';
import { depthwiseFilterGradient } from '../src/engine/depthwise-filter-kernel.js';
import { startBackend } from '../src/engine/backend.js';
import { prng } from '../src/data/synthetic-images.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';

let stockSegmentSum: unknown;

t.test('one pass = tfjs\'s stock cpu kernel, bit for bit', async t => {
  await tf.setBackend('cpu'); // stock: tandem's kernel is not installed on this engine yet
  const stock = tf.getKernel('UnsortedSegmentSum', 'cpu')!;
  stockSegmentSum = stock.kernelFunc;
  const r = prng(5);
  for (const [n, row, segments] of [[1, 1, 1], [7, 3, 4], [64, 16, 50], [200, 5, 9]]) {
    const x = Float32Array.from({ length: n * row }, () => (r() - 0.5) * 1e3);
    const ids = Int32Array.from({ length: n }, () => Math.floor(r() * (segments + 2)) - 1); // -1 and `segments`: out of range
    const want = tf.tidy(() => (tf.engine().runKernel('UnsortedSegmentSum', { x: tf.tensor(x, [n, row]), segmentIds: tf.tensor1d(ids, 'int32') }, { numSegments: segments }) as tf.Tensor).dataSync());
    const got = new Float32Array(segments * row);
    segmentSum(x, ids, segments, row, got);
    t.same(Array.from(got), Array.from(want), `${n} rows of ${row} into ${segments} segments`);
  }
  t.ok(stock, 'tfjs has a stock kernel to compare with');
});

t.test('the depthwise filter gradient = tfjs\'s stock cpu kernel, bit for bit, on cpu and wasm (native: oneDNN, native-kernels.test)', async t => {
  await tf.setBackend('cpu');
  const stockKernel = tf.getKernel('DepthwiseConv2dNativeBackpropFilter', 'cpu')!.kernelFunc;
  const engines = ['cpu', 'wasm'];
  type Shape4 = [number, number, number, number];
  const cases: [Shape4, Shape4, number, 'same' | 'valid'][] = [
    [[2, 7, 7, 3], [3, 3, 3, 1], 1, 'same'], [[2, 8, 8, 4], [3, 3, 4, 2], 2, 'same'], [[1, 9, 6, 2], [5, 3, 2, 3], 2, 'valid'], [[3, 4, 4, 5], [1, 1, 5, 1], 1, 'valid'],
  ];
  const stockOf = (x: tf.Tensor, dy: tf.Tensor, filterShape: number[], stride: number, pad: 'same' | 'valid') =>
    tf.tidy(() => (tf.engine().runKernel('DepthwiseConv2dNativeBackpropFilter', { x, dy }, { strides: stride, pad, dilations: 1, filterShape }) as tf.Tensor).dataSync().slice());
  const stock: Float32Array[] = [];
  const inputs = cases.map(([xs, ws, stride, pad], i) => {
    const x = tf.randomUniform(xs, -1, 1, 'float32', i + 1);
    const y = tf.depthwiseConv2d(x as tf.Tensor4D, tf.zeros(ws) as tf.Tensor4D, stride, pad);
    const dy = tf.randomUniform(y.shape, -1, 1, 'float32', i + 11);
    y.dispose();
    stock.push(stockOf(x, dy, ws, stride, pad) as Float32Array); // tfjs's own (tandem's is not installed on this engine yet)
    return { x: x.dataSync().slice(), xs, dy: dy.dataSync().slice(), dys: dy.shape, ws, stride, pad };
  });
  for (const engine of engines) {
    await startBackend(tf, engine);
    inputs.forEach((c, i) => {
      const got = stockOf(tf.tensor(c.x, c.xs), tf.tensor(c.dy, c.dys), c.ws, c.stride, c.pad);
      t.same(Array.from(got), Array.from(stock[i]), `${engine}: x ${c.xs.join('x')}, filter ${c.ws.join('x')}, stride ${c.stride}, ${c.pad}`);
    });
  }
  t.not(tf.getKernel('DepthwiseConv2dNativeBackpropFilter', 'cpu')!.kernelFunc, stockKernel, 'the cpu engine runs tandem\'s kernel, not the stock one');
  const flat = depthwiseFilterGradient(inputs[0].x, inputs[0].dy, { batch: 2, inHeight: 7, inWidth: 7, inChannels: 3, outHeight: 7, outWidth: 7, outChannels: 3,
    filterHeight: 3, filterWidth: 3, strideHeight: 1, strideWidth: 1, top: 1, left: 1 });
  t.same(Array.from(flat), Array.from(stock[0]), 'the loops themselves, called directly');
});

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
    const got = tf.tidy(() => tf.unsortedSegmentSum(tf.tensor(values, [300, 8]), tf.tensor1d(ids, 'int32'), 120).dataSync());
    t.same(Array.from(got), Array.from(want), `${engine}: the same bits`);
  }
  t.not(tf.getKernel('UnsortedSegmentSum', 'cpu')!.kernelFunc, stockSegmentSum, 'the cpu engine runs tandem\'s kernel, not the stock one');
});
