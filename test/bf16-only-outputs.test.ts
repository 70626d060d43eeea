// Gradients written in bf16 alone (src/engine/native/bf16-only-outputs.ts): under precision bf16 the pool's gradient
// inside a pooled convolution's gradient and relu's inside a fused convolution's are written into their bf16 shadow
// only; the float32 array is filled ("widened") from the shadow when something reads the values. Checked here:
// - a step through tfjs (relu convolutions with and without a pool after them) gives the same bits with the gradients
//   written in bf16 alone as with their float32 written too, and nothing widened them on the way;
// - reading such a tensor (dataSync) gives the widened shadow: the float32 kernel's values rounded to bf16;
// - disposing one widens nothing; in fp32 the kernel writes float32 as before;
// - a stale array handed to a primitive that reads float32 (precision fp32) is widened by the addon first.
// Skipped when the addon is not built (failed with TANDEM_REQUIRE_NATIVE=1), or when oneDNN has no bf16 kernel here.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { awkward, startBf16OrSkip } from './fixtures/bf16-gate.js';
import { identical } from './fixtures/native-compare.js';
import { prng } from '../src/data/synthetic-images.js';
import type { NativeAddon, NativeConvShape } from '../src/engine/native/native-addon.js';
import { OUTPUT_POOL } from '../src/engine/native/output-pool.js';
import { getEngine } from '../src/engine/engine-registry.js';
import { RELU_GRAD_KERNEL } from '../src/engine/native/elementwise-kernels.js';

/** Counts the addon's widenings while f runs. */
function widenings(addon: NativeAddon, f: () => void): number {
  const widen = addon.widenBf16;
  let n = 0;
  addon.widenBf16 = (bits, out) => (n++, widen.call(addon, bits, out));
  try {
    f();
  } finally {
    addon.widenBf16 = widen;
  }
  return n;
}

function convNet(): tf.LayersModel {
  const conv = (filters: number, first = false) =>
    tf.layers.conv2d({
      ...(first ? { inputShape: [12, 12, 3] } : {}),
      filters,
      kernelSize: 3,
      padding: 'same',
      activation: 'relu',
      kernelInitializer: 'heNormal',
      biasInitializer: tf.initializers.randomUniform({ minval: -0.1, maxval: 0.1, seed: 3 }),
    });
  return tf.sequential({
    layers: [
      conv(16, true),
      tf.layers.maxPooling2d({ poolSize: 2 }), // pooled: its gradient is the pool's, in bf16 alone
      conv(16), // relu alone: relu's gradient in bf16 alone
      conv(16),
      tf.layers.maxPooling2d({ poolSize: 2 }),
      tf.layers.flatten(),
      tf.layers.dense({ units: 4 }),
    ],
  });
}

function stepBits(addon: NativeAddon) {
  t.test('a conv net step: the same bits with gradients in bf16 alone as with float32 written too', t => {
    const model = convNet();
    getEngine('native').prepareModel?.(tf, model, { nativeFusion: true });
    const rand = prng(5);
    const xs = Float32Array.from({ length: 4 * 12 * 12 * 3 }, () => rand() * 2 - 1);
    const step = (bf16Alone: boolean) => {
      addon.setPrecision('bf16');
      const { shadowToWrite } = OUTPUT_POOL;
      let alone = 0;
      const marked = new Set<object>();
      OUTPUT_POOL.shadowToWrite = values => {
        const s = shadowToWrite.call(OUTPUT_POOL, values);
        if (s) marked.add(s);
        return bf16Alone ? s : undefined; // without: each kernel writes float32 and the convolutions cast it
      };
      try {
        let out: Float32Array[] = [];
        const widened = widenings(addon, () => {
          out = tf.tidy(() => {
            const x = tf.tensor4d(xs, [4, 12, 12, 3]);
            const loss = () => tf.sum(tf.square(model.apply(x, { training: true }) as tf.Tensor)) as tf.Scalar;
            const { value, grads } = tf.variableGrads(loss);
            return [value, ...Object.values(grads)].map(g => Float32Array.from(g.dataSync()));
          });
        });
        for (const s of marked) if ((s as { stale?: boolean }).stale !== undefined) alone++;
        return { out, widened, alone };
      } finally {
        OUTPUT_POOL.shadowToWrite = shadowToWrite;
        addon.setPrecision('fp32');
      }
    };
    const withAlone = step(true),
      without = step(false);
    t.ok(withAlone.alone >= 2, `${withAlone.alone} gradients written in bf16 alone`);
    t.equal(without.alone, 0, 'none without');
    t.equal(withAlone.widened, 0, 'none widened: only the convolutions read them');
    t.equal(withAlone.out.length, without.out.length);
    withAlone.out.forEach((v, i) => t.ok(identical(v, without.out[i]), `output ${i}: the same bits`));
    model.dispose();
    t.end();
  });
}

function readingWidens(addon: NativeAddon) {
  t.test("reading a gradient written in bf16 alone gives float32's values rounded to bf16", t => {
    const dy = tf.tensor(awkward(4000, 1)),
      x = tf.tensor(awkward(4000, 2));
    const exact = tf.engine().runKernel(RELU_GRAD_KERNEL, { dy, x }) as tf.Tensor;
    addon.setPrecision('bf16');
    const alone = tf.engine().runKernel(RELU_GRAD_KERNEL, { dy, x }, { onlyConvolutionsRead: true }) as tf.Tensor;
    const unread = tf.engine().runKernel(RELU_GRAD_KERNEL, { dy, x }, { onlyConvolutionsRead: true }) as tf.Tensor;
    addon.setPrecision('fp32');
    const rounded = new Uint16Array(4000),
      widened = new Float32Array(4000);
    addon.castToBf16(exact.dataSync() as Float32Array, rounded, 'auto');
    addon.widenBf16(rounded, widened);
    let read: Float32Array | undefined;
    t.equal(
      widenings(addon, () => (read = alone.dataSync() as Float32Array)),
      1,
      'dataSync widens once',
    );
    t.ok(identical(read!, widened), 'the values are the float32 ones rounded to bf16');
    t.equal(
      widenings(addon, () => unread.dispose()),
      0,
      'disposing one widens nothing',
    );
    const fp32 = tf.engine().runKernel(RELU_GRAD_KERNEL, { dy, x }, { onlyConvolutionsRead: true }) as tf.Tensor;
    t.ok(identical(fp32.dataSync(), exact.dataSync()), 'in fp32 the attribute changes nothing');
    tf.dispose([dy, x, exact, alone, fp32]);
    t.end();
  });
}

function staleArraysWidened(addon: NativeAddon) {
  t.test('a primitive reading float32 widens a stale array first', t => {
    const [N, H, W, C, K, OC] = [2, 6, 7, 8, 3, 16];
    const shape: NativeConvShape = [N, H, W, C, K, K, OC, 1, 1, 1, 1, 1, 1, H, W, 1];
    const w = awkward(K * K * C * OC, 3).map(v => (Number.isFinite(v) ? v : 0.5));
    const bits = new Uint16Array(N * H * W * OC);
    addon.castToBf16(awkward(bits.length, 4), bits, 'auto');
    const widened = new Float32Array(bits.length);
    addon.widenBf16(bits, widened);
    for (const precision of ['fp32', 'bf16'] as const) {
      addon.setPrecision(precision);
      const stale = new Float32Array(bits.length).fill(NaN),
        dx = new Float32Array(N * H * W * C),
        expected = new Float32Array(dx.length);
      addon.conv2dBackwardData(widened, w, expected, shape);
      addon.conv2dBackwardData(stale, w, dx, shape, bits, 2);
      t.ok(identical(dx, expected), `${precision}: the gradient of the widened values`);
      if (precision === 'fp32') t.ok(identical(stale, widened), 'fp32 read float32: the array was widened');
    }
    addon.setPrecision('fp32');
    t.end();
  });
}

function registerTests(addon: NativeAddon) {
  t.teardown(() => addon.setPrecision('fp32'));
  stepBits(addon);
  readingWidens(addon);
  staleArraysWidened(addon);
}

const addon = await startBf16OrSkip();
if (addon) registerTests(addon);
