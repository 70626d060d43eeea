// The Embedding gradient (UnsortedSegmentSum) in one pass gives the bits of tfjs's own cpu kernel
// (numSegments masked sums), on random shapes, repeated and out-of-range ids; and it is what the
// cpu, native and wasm engines run after startBackend.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { segmentSum } from '../src/engine/fast-gradients.js';
import { startBackend } from '../src/engine/backend.js';
import { prng } from '../src/data/synthetic-images.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';

t.test('one pass = tfjs\'s stock cpu kernel, bit for bit', async t => {
  await tf.setBackend('cpu'); // stock: tandem's kernel is not installed on this engine yet
  const stock = tf.getKernel('UnsortedSegmentSum', 'cpu')!;
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
});
