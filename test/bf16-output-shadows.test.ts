// Outputs written with their bf16 shadow (precision bf16): BatchNormalization's input gradient, relu, relu's gradient
// (the addon's loop: tfjs reaches it inside a fused convolution's gradient, bf16-only-outputs.ts) and a convolution's
// fused activation write each block's bf16 bits as they write it, so the convolution that reads the output next reads
// the shadow instead of casting the whole activation again (native/src/batch-norm.cc, eltwise.cc, addon.cc).
// Checked here:
// - each loop's shadow holds the cast of its output (castToBf16's bits), channels last and not, for channel counts
//   that leave a block of 4,096 elements uneven, and on values holding NaN, ±Infinity, subnormals and ties;
// - likewise a convolution's fused activation pass (the next convolution's x);
// - without a shadow the loops write the same output;
// - a ResNet-style step through tfjs (conv, BatchNormalization + relu, add, relu) gives the same bits with the shadows
//   as with every convolution converting its inputs itself, and the convolutions did read shadows these loops filled.
// Skipped when the addon is not built (failed with TANDEM_REQUIRE_NATIVE=1), or when oneDNN has no bf16 kernel here.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { awkward, startBf16OrSkip } from './fixtures/bf16-gate.js';
import { identical } from './fixtures/native-compare.js';
import { prng } from '../src/data/synthetic-images.js';
import type { NativeAddon, NativeConvShape } from '../src/engine/native/native-addon.js';
import { OUTPUT_POOL, type Bf16Shadow } from '../src/engine/native/output-pool.js';
import { getEngine } from '../src/engine/engine-registry.js';
import { trainBatchNormalization } from '../src/model/sync-batch-norm.js';

/** The cast of `values` as the convolutions make it. */
function cast(addon: NativeAddon, values: Float32Array): Uint16Array {
  const out = new Uint16Array(values.length);
  addon.castToBf16(values, out, 'auto');
  return out;
}

const sameBits = (a: ArrayLike<number>, b: ArrayLike<number>) => a.length === b.length && identical(a, b);

function loopsWriteTheirCast(addon: NativeAddon) {
  // [outer, channels, inner]: channels last with 16 (blocks of 4,096 exactly), 3 and 24 (uneven blocks), and 7 with
  // inner 5 (the general loop)
  for (const [outer, C, inner] of [
    [700, 16, 1],
    [3001, 3, 1],
    [555, 24, 1],
    [90, 7, 5],
  ]) {
    t.test(
      `BatchNormalization's input gradient and relu loops, [${outer}, ${C}, ${inner}]: the shadow is the output's cast`,
      t => {
        const n = outer * C * inner;
        const x = awkward(n, 1),
          dy = awkward(n, 2),
          z = awkward(n, 3);
        const mean = awkward(C, 4).map(v => (Number.isFinite(v) ? v : 0.25)),
          gamma = awkward(C, 6).map(v => (Number.isFinite(v) ? v : 2));
        const scale = Float64Array.from({ length: C }, (_, c) => 0.5 + c / 7),
          sums = Float32Array.from({ length: 2 * C }, (_, c) => (c % 5) - 2);
        const runs: [string, (out: Float32Array, shadow: Uint16Array | null) => void][] = [
          [
            'inputGradient',
            (o, s) => addon.bnInputGradient(dy, x, mean, scale, gamma, sums, 9, outer, C, inner, o, null, s),
          ],
          [
            'inputGradient through relu',
            (o, s) => addon.bnInputGradient(dy, x, mean, scale, gamma, sums, 9, outer, C, inner, o, z, s),
          ],
          ['relu', (o, s) => addon.relu(x, o, n, s)],
          ['reluGrad', (o, s) => addon.reluGrad(dy, x, o, n, s)],
        ];
        for (const [name, run] of runs) {
          const plain = new Float32Array(n),
            out = new Float32Array(n),
            shadow = new Uint16Array(n + 1).fill(0x1234);
          run(plain, null);
          run(out, shadow.subarray(0, n));
          t.ok(sameBits(out, plain), `${name}: the same output with a shadow as without`);
          t.ok(sameBits(shadow.subarray(0, n), cast(addon, out)), `${name}: the shadow holds the output's cast`);
          t.equal(shadow[n], 0x1234, `${name}: nothing written past the shadow`);
        }
        t.end();
      },
    );
  }
}

function convActivationWritesItsCast(addon: NativeAddon) {
  t.test("a convolution's activation pass writes y's shadow", t => {
    addon.setPrecision('bf16');
    const [N, H, W, C, K, OC] = [3, 11, 13, 5, 3, 24];
    const shape: NativeConvShape = [N, H, W, C, K, K, OC, 1, 1, 1, 1, 1, 1, H, W, 1];
    const x = awkward(N * H * W * C, 7),
      w = awkward(K * K * C * OC, 8).map(v => (Number.isFinite(v) ? v : 0.5)),
      bias = awkward(OC, 9).map(v => (Number.isFinite(v) ? v : 0));
    for (const [name, activation] of [
      ['relu', 1],
      ['relu6', 2],
      ['elu', 5],
    ] as const) {
      const plain = new Float32Array(N * H * W * OC),
        y = new Float32Array(plain.length),
        shadow = new Uint16Array(plain.length);
      addon.conv2dForward(x, w, bias, plain, shape, activation, 0.2, null, false);
      addon.conv2dForward(x, w, bias, y, shape, activation, 0.2, null, false, shadow);
      t.ok(sameBits(y, plain), `${name}: the same y with a shadow as without`);
      t.ok(sameBits(shadow, cast(addon, y)), `${name}: the shadow holds y's cast`);
    }
    addon.setPrecision('fp32');
    t.end();
  });
}

/** A conv stem, a residual block (conv, BatchNormalization + relu, conv, BatchNormalization, add, relu), a head. */
function resnetBlock(): tf.LayersModel {
  const conv = (filters: number, kernelSize = 3) =>
    tf.layers.conv2d({ filters, kernelSize, padding: 'same', useBias: false, kernelInitializer: 'heNormal' });
  const input = tf.input({ shape: [10, 10, 4] });
  const apply = (layer: tf.layers.Layer, x: tf.SymbolicTensor | tf.SymbolicTensor[]) =>
    layer.apply(x) as tf.SymbolicTensor;
  const stem = apply(
    tf.layers.activation({ activation: 'relu' }),
    apply(tf.layers.batchNormalization(), apply(conv(16), input)),
  );
  let y = apply(
    tf.layers.activation({ activation: 'relu' }),
    apply(tf.layers.batchNormalization(), apply(conv(16), stem)),
  );
  y = apply(tf.layers.batchNormalization(), apply(conv(16), y));
  const out = apply(tf.layers.activation({ activation: 'relu' }), apply(tf.layers.add(), [y, stem]));
  const head = apply(tf.layers.dense({ units: 3 }), apply(tf.layers.flatten(), apply(conv(8, 1), out)));
  return tf.model({ inputs: input, outputs: head });
}

function stepThroughTfjs(addon: NativeAddon) {
  t.test('a residual block step in bf16: the same bits with written shadows as with casts', t => {
    const model = resnetBlock();
    getEngine('native').prepareModel?.(tf, model, { nativeFusion: true });
    trainBatchNormalization(tf, model);
    const rand = prng(11);
    const xs = Float32Array.from({ length: 6 * 10 * 10 * 4 }, () => rand() * 2 - 1);
    const written = new Set<Bf16Shadow>();
    let readWritten = 0;
    const step = (fresh: boolean) => {
      addon.setPrecision('bf16');
      const { shadowOf, shadowToWrite } = OUTPUT_POOL;
      OUTPUT_POOL.shadowToWrite = values => {
        if (fresh) return undefined; // nothing written with its shadow
        const s = shadowToWrite.call(OUTPUT_POOL, values);
        if (s) written.add(s);
        return s;
      };
      OUTPUT_POOL.shadowOf = values => {
        if (fresh) return undefined; // every convolution converts its inputs itself
        const s = shadowOf.call(OUTPUT_POOL, values);
        if (s && s.filled && written.has(s)) readWritten++;
        return s;
      };
      try {
        return tf.tidy(() => {
          const x = tf.tensor4d(xs, [6, 10, 10, 4]);
          const loss = () => tf.sum(tf.square(model.apply(x, { training: true }) as tf.Tensor)) as tf.Scalar;
          const { value, grads } = tf.variableGrads(loss);
          return [value, ...Object.values(grads)].map(g => Float32Array.from(g.dataSync()));
        });
      } finally {
        Object.assign(OUTPUT_POOL, { shadowOf, shadowToWrite });
        addon.setPrecision('fp32');
      }
    };
    const withShadows = step(false),
      without = step(true);
    // forward: the relu after the add (the 1×1 conv reads it); backward: three input gradients, each read twice
    t.ok(readWritten >= 6, `convolutions read ${readWritten} shadows written by the loops (${written.size} written)`);
    t.equal(withShadows.length, without.length);
    withShadows.forEach((v, i) => t.ok(identical(v, without[i]), `output ${i}: the same bits`));
    model.dispose();
    t.end();
  });
}

function registerTests(addon: NativeAddon) {
  t.teardown(() => addon.setPrecision('fp32'));
  loopsWriteTheirCast(addon);
  convActivationWritesItsCast(addon);
  stepThroughTfjs(addon);
}

const addon = await startBf16OrSkip();
if (addon) registerTests(addon);
