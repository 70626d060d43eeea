// The native backend as a whole against the stock tfjs cpu backend: a case the addon does not cover runs the
// stock kernel (counted), never a wrong answer; the gradients of a small network both ways; SharedArrayBuffer-backed
// tensors and the thread count. The kernels one by one: native-kernels-{conv,matmul,elementwise}.test.ts.
// Skipped when the addon is not built, unless TANDEM_REQUIRE_NATIVE=1 (CI).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { randomInput, compare, counts, startNativeAndStock } from './fixtures/native-compare.js';
import { prng } from '../src/data/synthetic-images.js'; // mulberry32, for shapes and values
import type { NativeAddon } from '../src/engine/native/native-addon.js';

const addon = await startNativeAndStock();
if (addon) registerTests(addon);

function registerTests(addon: NativeAddon) {
  t.test('cases the addon does not cover fall back to the stock kernel, with the stock answer', t => {
    const rand = prng(15);
    const x = randomInput(rand, [2, 9, 9, 3]),
      f = randomInput(rand, [3, 3, 3, 4]);
    const fallbacks = (k: string) => counts(k).fallback;
    const c0 = fallbacks('Conv2D');
    t.equal(
      compare(t, 'dilated conv', [x, f], (a, k) => tf.conv2d(a as tf.Tensor4D, k as tf.Tensor4D, 1, 'same', 'NHWC', 2)),
      1,
      'dilation 2: stock answer',
    );
    t.ok(fallbacks('Conv2D') > c0, 'dilation 2 fell back');
    const r0 = fallbacks('Relu');
    t.equal(
      compare(
        t,
        'int32 relu',
        [{ shape: [4], values: new Int32Array([-2, -1, 0, 5]), dtype: 'int32' }],
        a => tf.relu(a),
        { exact: true },
      ),
      1,
      'int32 relu: stock answer',
    );
    t.ok(fallbacks('Relu') > r0, 'int32 relu fell back');
    const a = randomInput(rand, [5, 6]),
      b = randomInput(rand, [6, 4]),
      alpha = randomInput(rand, [4]);
    const p0 = fallbacks('_FusedMatMul');
    t.equal(
      compare(t, 'prelu fused matmul', [a, b, alpha], (p, q, w) =>
        tf.fused.matMul({ a: p, b: q, activation: 'prelu', preluActivationWeights: w }),
      ),
      1,
      'prelu: stock answer',
    );
    t.ok(fallbacks('_FusedMatMul') > p0, 'prelu fell back');
    const m0 = fallbacks('BatchMatMul');
    t.equal(
      compare(
        t,
        'two-sided batch broadcast',
        [randomInput(rand, [2, 1, 3, 4]), randomInput(rand, [1, 3, 4, 2])],
        (p, q) => tf.matMul(p, q),
      ),
      1,
      'batch [2,1] x [1,3]: stock answer',
    );
    t.ok(fallbacks('BatchMatMul') > m0, 'two-sided broadcast fell back');
    const s0 = fallbacks('Sum');
    t.equal(
      compare(
        t,
        'int32 sum',
        [{ shape: [3, 2], values: new Int32Array([1, 2, 3, 4, 5, 6]), dtype: 'int32' }],
        z => tf.sum(z, 0),
        { exact: true },
      ),
      1,
      'int32 sum: stock answer',
    );
    t.ok(fallbacks('Sum') > s0, 'int32 sum fell back');
    const a0 = fallbacks('Add');
    t.equal(
      compare(
        t,
        'int32 add',
        [
          { shape: [2], values: new Int32Array([1, 2]), dtype: 'int32' },
          { shape: [2], values: new Int32Array([3, -4]), dtype: 'int32' },
        ],
        (p, q) => tf.add(p, q),
        { exact: true },
      ),
      1,
      'int32 add: stock answer',
    );
    t.ok(fallbacks('Add') > a0, 'int32 add fell back');
    t.end();
  });

  t.test('gradients of a small conv network on native equal the stock cpu gradients', t => {
    const rand = prng(16);
    const x = randomInput(rand, [4, 12, 12, 3]),
      w1 = randomInput(rand, [3, 3, 3, 8]),
      b1 = randomInput(rand, [8]),
      w2 = randomInput(rand, [3, 3, 8, 8]),
      w3 = randomInput(rand, [32, 5]),
      b3 = randomInput(rand, [5]);
    const net = (a: tf.Tensor, k1: tf.Tensor, c1: tf.Tensor, k2: tf.Tensor, k3: tf.Tensor, c3: tf.Tensor) => {
      let h = tf.relu(tf.add(tf.conv2d(a as tf.Tensor4D, k1 as tf.Tensor4D, 1, 'same'), c1));
      h = tf.maxPool(h as tf.Tensor4D, 2, 2, 'valid');
      h = tf.relu(tf.conv2d(h as tf.Tensor4D, k2 as tf.Tensor4D, 2, 'same'));
      h = tf.maxPool(h as tf.Tensor4D, 3, 2, 'same');
      return tf
        .relu(tf.add(tf.matMul(h.reshape([4, -1]), k3), c3))
        .square()
        .sum() as tf.Scalar;
    };
    t.equal(
      compare(t, 'network gradients', [x, w1, b1, w2, w3, b3], (...v) => tf.grads(net)(v), { tol: 1e-4 }),
      1,
      'dx, dW and db of conv(same)+bias+relu, maxpool, strided conv, overlapping maxpool, dense+bias+relu',
    );
    t.end();
  });

  t.test('SharedArrayBuffer-backed tensors are read in place, and the thread count is per thread', t => {
    const rand = prng(17);
    const sab = new SharedArrayBuffer(4 * 2 * 6 * 6 * 2);
    const values = new Float32Array(sab);
    values.set(randomInput(rand, [2, 6, 6, 2]).values);
    const f = randomInput(rand, [3, 3, 2, 3]);
    t.equal(
      compare(t, 'conv on a SAB-backed input', [{ shape: [2, 6, 6, 2], values }, f], (a, k) =>
        tf.conv2d(a as tf.Tensor4D, k as tf.Tensor4D, 1, 'same'),
      ),
      1,
      'same as stock',
    );
    addon.setNumThreads(2);
    t.equal(addon.getNumThreads(), 2, 'two OpenMP threads on this thread');
    t.equal(
      compare(t, 'conv with 2 threads', [{ shape: [2, 6, 6, 2], values }, f], (a, k) =>
        tf.conv2d(a as tf.Tensor4D, k as tf.Tensor4D, 1, 'same'),
      ),
      1,
      'same answer with 2 threads',
    );
    addon.setNumThreads(1);
    t.throws(
      () =>
        addon.conv2dForward(
          new Float32Array(3),
          new Float32Array(1),
          null,
          new Float32Array(1),
          [1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 1],
          0,
          0,
        ),
      /x holds 3 floats, the kernel needs 4/,
      'a too-short array is a RangeError naming the argument',
    );
    t.end();
  });
}
