// A relu convolution and the max pool that alone reads it run as one kernel in precision bf16
// (TandemConv2DReluMaxPool): the pooled values are the unfused bf16 path's rounded to bf16 (what the next
// convolution multiplied anyway) within one bf16 rounding; the gradients are as near fp32's as the unfused bf16
// path's (its ties differ: two cells rounding to one value; bf16 gradients of a random batch are ~10% from fp32's,
// sums that cancel); NaN reaches the loss and the gradients as unfused; nothing leaks. Pools whose windows do not
// tile the convolution's output, and fp32, keep tfjs's two kernels. Skipped without the addon (failed with
// TANDEM_REQUIRE_NATIVE=1) and where bf16 cannot run.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { startNativeAndStock } from './fixtures/native-compare.js';
import { bf16Support } from '../src/engine/native/bf16-support.js';
import type { NativeAddon, NativeConvShape } from '../src/engine/native/native-addon.js';
import { prng } from '../src/data/synthetic-images.js';
import { nativeKernelCounts } from '../src/engine/native/native-backend.js';
import { fuseConvLayers } from '../src/engine/native/fused-conv-layers.js';
import { CONV_RELU_POOL_KERNEL } from '../src/engine/native/conv-pool-kernel.js';

/** alexnet's blocks: relu conv → 2×2 pool (tiles), twice; then a pool that does not tile (same, 5×5 → 3×3). */
function buildModel(blocks = 3): tf.LayersModel {
  const init = (seed: number) => tf.initializers.glorotUniform({ seed });
  const layers: tf.layers.Layer[] = [];
  const conv = (filters: number, seed: number, first = false) =>
    tf.layers.conv2d({
      ...(first ? { inputShape: [20, 20, 3] } : {}),
      filters,
      kernelSize: 3,
      padding: 'same',
      activation: 'relu',
      kernelInitializer: init(seed),
      biasInitializer: tf.initializers.randomUniform({ minval: -0.2, maxval: 0.2, seed: seed + 10 }),
    });
  layers.push(conv(16, 1, true), tf.layers.maxPooling2d({ poolSize: 2 })); // 20 → 10
  if (blocks > 1) layers.push(conv(32, 2), tf.layers.maxPooling2d({ poolSize: 2 })); // 10 → 5
  if (blocks > 2) layers.push(conv(32, 3), tf.layers.maxPooling2d({ poolSize: 2, padding: 'same' })); // 5 → 3
  if (blocks > 2)
    layers.push(tf.layers.flatten(), tf.layers.dense({ units: 5, kernelInitializer: init(4), name: 'logits' }));
  return tf.sequential({ layers });
}

function lossAndGradients(model: tf.LayersModel, x: tf.Tensor, y: tf.Tensor) {
  const vars = model.trainableWeights.map(w => w.read() as tf.Variable);
  const { value, grads } = tf.variableGrads(
    () => tf.losses.softmaxCrossEntropy(y, model.apply(x, { training: true }) as tf.Tensor) as tf.Scalar,
    vars,
  );
  const out = { loss: value.dataSync()[0], grads: vars.map(v => grads[v.name].dataSync().slice() as Float32Array) };
  tf.dispose([value, ...Object.values(grads)]);
  return out;
}

/** ||a − b|| / ||b||. */
function relative(a: Float32Array, b: Float32Array): number {
  let d = 0,
    n = 0;
  a.forEach((v, i) => ((d += (v - b[i]) ** 2), (n += b[i] ** 2)));
  return Math.sqrt(d / n);
}

const ran = () => nativeKernelCounts()[CONV_RELU_POOL_KERNEL]?.native ?? 0;
const bits = new Uint32Array(1),
  float = new Float32Array(bits.buffer);
const isBf16 = (v: number) => ((float[0] = v), (bits[0] & 0xffff) === 0);

function registerTests(addon: NativeAddon): void {
  const x = tf.randomUniform([4, 20, 20, 3], -1, 1, 'float32', 5);
  const y = tf.oneHot(tf.tensor1d([0, 1, 2, 3], 'int32'), 5);
  const inPrecision = <T>(p: 'bf16' | 'fp32', f: () => T): T => {
    addon.setPrecision(p);
    try {
      return f();
    } finally {
      addon.setPrecision('fp32');
    }
  };
  t.teardown(() => tf.dispose([x, y]));

  t.test('the pooled values: the unfused bf16 path’s, rounded to bf16 (one rounding apart at most)', async t => {
    const plain = buildModel(1),
      fused = buildModel(1);
    fuseConvLayers(tf, fused);
    const before = ran();
    const [a, b] = inPrecision('bf16', () =>
      [plain, fused].map(m => tf.tidy(() => (m.apply(x, { training: true }) as tf.Tensor).dataSync().slice())),
    );
    t.equal(ran() - before, 1, 'the one kernel ran');
    t.ok(
      b.every(v => isBf16(v)),
      'every pooled value is a bf16 value',
    );
    const far = b.filter((v, i) => Math.abs(v - a[i]) > 2 ** -8 * Math.abs(a[i])).length;
    const exact = b.filter((v, i) => v === Math.fround(a[i]) && isBf16(a[i])).length;
    t.equal(far, 0, `all ${b.length} within one bf16 rounding of the unfused path (${exact} already bf16 there)`);
    plain.dispose();
    fused.dispose();
  });

  t.test("gradients as near fp32's as the unfused bf16 path's (1.5×); fp32 and odd pools unfused", async t => {
    const plain = buildModel(),
      fused = buildModel();
    fuseConvLayers(tf, fused);
    const before = ran();
    const fp32 = lossAndGradients(plain, x, y);
    t.equal(ran() - before, 0, 'fp32: tfjs’s two kernels');
    const unfused = inPrecision('bf16', () => lossAndGradients(plain, x, y));
    const one = inPrecision('bf16', () => lossAndGradients(fused, x, y));
    t.equal(ran() - before, 2, 'bf16: the two tiling blocks as one kernel each; the pool that does not tile apart');
    t.ok(Math.abs(one.loss - unfused.loss) < 1e-2 * unfused.loss, `loss ${one.loss} ~ ${unfused.loss}`);
    one.grads.forEach((g, i) => {
      const [f, u] = [relative(g, fp32.grads[i]), relative(unfused.grads[i], fp32.grads[i])];
      t.ok(f <= 1.5 * u + 1e-3, `variable ${i}: ${f.toExponential(2)} from fp32 (unfused bf16: ${u.toExponential(2)})`);
    });
    const tensors = tf.memory().numTensors;
    inPrecision('bf16', () => lossAndGradients(fused, x, y));
    t.equal(tf.memory().numTensors, tensors, 'a step leaves no tensor behind');
    plain.dispose();
    fused.dispose();
  });

  t.test("the pool gradient's bf16 copy has the conversion's bits: a convolution reads the same from it", async t => {
    const [n, h, w, c] = [2, 8, 8, 16];
    const rand = prng(11);
    const special = [NaN, Infinity, -Infinity, 0, -0, 1e-40, -1e-40, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -3.4e38];
    // image 0 holds the special values (NaN and infinities spread over a convolution's outputs), image 1 none
    const dy = Float32Array.from({ length: (n * h * w * c) / 4 }, (_, i) =>
      i % 13 === 5 && i < (h * w * c) / 4 ? special[((i / 13) % special.length) | 0] : rand() * 4 - 2,
    );
    const y = Float32Array.from(dy, () => rand() - 0.3); // relu's step: where > 0
    const image0 = (i: number) => i < (h * w * c) / 4;
    const winners = Int8Array.from(dy, (_, i) =>
      i % 17 === 3 && image0(i) ? -2 : i % 19 === 4 ? -1 : (rand() * 4) | 0,
    );
    const dx = new Float32Array(n * h * w * c),
      bits = new Uint16Array(dx.length);
    addon.maxPoolReluGradWinners(dy, null, y, winners, dx, [n, h, w, c, 2, 2, 2, 2, 0, 0, h / 2, w / 2], bits);
    const filter = Float32Array.from({ length: 3 * 3 * 8 * c }, () => rand() - 0.5);
    const shape: NativeConvShape = [n, h, w, 8, 3, 3, c, 1, 1, 1, 1, 1, 1, h, w, 1];
    const [converted, fromCopy] = inPrecision('bf16', () =>
      [null, bits].map(copy => {
        const out = new Float32Array(n * h * w * 8);
        addon.conv2dBackwardData(dx, filter, out, shape, copy, copy !== null);
        return out;
      }),
    );
    t.ok(
      converted.every((v, i) => Object.is(v, fromCopy[i])),
      'the same bits as the convolution converting dx itself',
    );
    t.ok(
      converted.subarray(converted.length / 2).every(Number.isFinite),
      'image 1: finite outputs (where a rounding apart would show)',
    );
    t.ok(
      dx.some(Number.isNaN) && dx.some(v => v !== 0 && Number.isFinite(v)),
      'on NaN, infinite, tied and ordinary values',
    );
  });

  t.test('NaN in the input: the loss and the gradients are NaN, as unfused', async t => {
    const values = x.dataSync().slice();
    values[7] = NaN;
    const xNaN = tf.tensor(values, x.shape);
    const plain = buildModel(),
      fused = buildModel();
    fuseConvLayers(tf, fused);
    const [a, b] = inPrecision('bf16', () => [lossAndGradients(plain, xNaN, y), lossAndGradients(fused, xNaN, y)]);
    const nan = (r: typeof a) => r.grads.reduce((s, g) => s + g.filter(Number.isNaN).length, 0);
    t.ok(Number.isNaN(a.loss) && Number.isNaN(b.loss), 'the loss is NaN both ways');
    t.ok(nan(a) > 0 && nan(b) > 0, `NaN gradient values: ${nan(a)} unfused, ${nan(b)} fused`);
    tf.dispose(xNaN);
    plain.dispose();
    fused.dispose();
  });
}

const addon = await startNativeAndStock();
if (addon) {
  const refusal = bf16Support(addon).refusal;
  if (refusal) t.comment(`skipped: ${refusal}`);
  else registerTests(addon);
}
