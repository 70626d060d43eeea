// bf16 shadows (src/engine/native/output-pool.ts, native/src/bf16-cast.cc): under precision bf16 a convolution reads
// an owned output's bf16 copy, converted once, where it reordered the activation itself each time. Checked here:
// - the addon's own conversion gives oneDNN's reorder's bits: each convolution kernel (forward, data gradient,
//   weight gradient; regular and depthwise) gives the same output with a shadow as without, on inputs holding
//   NaN, ±Infinity, ±0, subnormals and values whose rounding ties, and a shadow filled by one kernel serves the next;
// - the pool's bookkeeping: a shadow only for an output the pool owns, none once it is handed out by dataSync(),
//   and a fresh (unfilled) one when the array comes back for another output;
// - through tfjs: a model's step in bf16 gives the same bits with shadows as with every input converted afresh.
// Skipped when the addon is not built (failed with TANDEM_REQUIRE_NATIVE=1), or when oneDNN has no bf16 kernel here.
import t from 'tap';
import { awkward, startBf16OrSkip } from './fixtures/bf16-gate.js';
import * as tf from '@tensorflow/tfjs';
import { prng } from '../src/data/synthetic-images.js';
import type { NativeAddon, NativeConvShape } from '../src/engine/native/native-addon.js';
import { OUTPUT_POOL, type Bf16Shadow } from '../src/engine/native/output-pool.js';
import { identical } from './fixtures/native-compare.js';

const addon = await startBf16OrSkip();
if (addon) registerTests(addon);

/** The array the backend holds for t (read in place, as the kernels read it). */
function held(x: tf.Tensor): Float32Array {
  return (tf.backend() as unknown as { data: { get(id: object): { values: Float32Array } } }).data.get(x.dataId).values;
}

function sameBits(a: Float32Array, b: Float32Array): boolean {
  const bytes = (v: Float32Array) => Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  return a.length === b.length && bytes(a).equals(bytes(b));
}

function registerTests(addon: NativeAddon) {
  t.teardown(() => addon.setPrecision('fp32'));

  // three channels: the weight gradient runs as im2col and matmuls (conv-im2col.cc), reading x's shadow for its columns
  for (const [depthwise, C] of [
    [false, 16],
    [true, 16],
    [false, 3],
  ] as const) {
    t.test(
      `${depthwise ? 'depthwise' : 'regular'} convolution kernels, ${C} channels: a shadow gives the reorder's bits`,
      t => {
        addon.setPrecision('bf16');
        const [N, H, W, K] = [2, 9, 9, 3],
          OC = depthwise ? C : 32;
        const shape: NativeConvShape = [N, H, W, C, K, K, OC, 1, 1, 1, 1, 1, 1, H, W, depthwise ? C : 1];
        const x = awkward(N * H * W * C, 1),
          dy = awkward(N * H * W * OC, 2),
          w = awkward(K * K * C * (depthwise ? 1 : OC), 3).map(v => (Number.isFinite(v) ? v : 0.5));
        const xShadow = new Uint16Array(x.length),
          dyShadow = new Uint16Array(dy.length);
        const plain = {
          y: new Float32Array(dy.length),
          dx: new Float32Array(x.length),
          dw: new Float32Array(w.length),
        };
        const shadowed = {
          y: new Float32Array(dy.length),
          dx: new Float32Array(x.length),
          dw: new Float32Array(w.length),
        };
        addon.conv2dForward(x, w, null, plain.y, shape, 0, 0);
        addon.conv2dBackwardData(dy, w, plain.dx, shape);
        addon.conv2dBackwardWeights(x, dy, plain.dw, null, shape);
        t.equal(addon.conv2dForward(x, w, null, shadowed.y, shape, 0, 0, xShadow, false), 1, 'forward filled x');
        t.equal(addon.conv2dBackwardData(dy, w, shadowed.dx, shape, dyShadow, false), 1, 'data gradient filled dy');
        // both shadows filled: the weight gradient converts nothing, and must still give the reorder's bits
        const filled = addon.conv2dBackwardWeights(x, dy, shadowed.dw, null, shape, xShadow, true, dyShadow, true);
        t.equal(filled, 3, 'the weight gradient read both shadows');
        t.ok(sameBits(plain.y, shadowed.y), 'forward: the same bits');
        t.ok(sameBits(plain.dx, shadowed.dx), 'data gradient: the same bits');
        t.ok(sameBits(plain.dw, shadowed.dw), 'weight gradient from filled shadows: the same bits');
        t.ok(
          plain.y.some(Number.isNaN) && plain.y.some(v => Number.isFinite(v) && v !== 0),
          'NaN and numbers reached y',
        );
        // a shadow marked filled is trusted: garbage in it shows in the output (the flag is what the pool keeps)
        const stale = new Uint16Array(x.length).fill(0x3f80); // 1.0 everywhere
        const wrong = new Float32Array(dy.length);
        addon.conv2dForward(x, w, null, wrong, shape, 0, 0, stale, true);
        t.notOk(sameBits(plain.y, wrong), 'a filled shadow is read, not x');
        addon.setPrecision('fp32');
        t.equal(
          addon.conv2dForward(x, w, null, wrong, shape, 0, 0, new Uint16Array(x.length), false),
          0,
          'fp32: unused',
        );
        t.end();
      },
    );
  }

  t.test("the pool's shadows: only for owned outputs, gone when handed out or recycled", t => {
    addon.setPrecision('bf16');
    const input = tf.tensor(awkward(4096, 4));
    t.equal(OUTPUT_POOL.shadowOf(held(input)), undefined, 'a user tensor: none');
    const owned = tf.mul(input, 1); // a native kernel's output: the pool's
    const values = held(owned);
    const shadow = OUTPUT_POOL.shadowOf(values);
    t.ok(shadow && !shadow.filled, 'an owned output: an empty shadow');
    shadow!.filled = true;
    t.equal(OUTPUT_POOL.shadowOf(values), shadow, 'the same shadow while the output lives');
    owned.dispose();
    const next = tf.mul(input, 2); // the same length: the recycled array
    const nextValues = held(next);
    t.equal(nextValues, values, 'the array came back for the next output');
    const fresh = OUTPUT_POOL.shadowOf(nextValues);
    t.ok(fresh && !fresh.filled, 'with an unfilled shadow');
    next.dataSync(); // handed out: the caller may write it
    t.equal(OUTPUT_POOL.shadowOf(nextValues), undefined, 'none once handed out by dataSync()');
    tf.dispose([input, next]);
    addon.setPrecision('fp32');
    t.end();
  });

  t.test('a conv net step in bf16: the same bits with shadows as with every input converted afresh', t => {
    const rand = prng(7);
    const model = tf.sequential({
      layers: [
        tf.layers.conv2d({ inputShape: [12, 12, 8], filters: 16, kernelSize: 3, padding: 'same', activation: 'relu' }),
        tf.layers.conv2d({ filters: 16, kernelSize: 3, padding: 'same', activation: 'relu' }),
        tf.layers.depthwiseConv2d({ kernelSize: 3, padding: 'same' }),
        tf.layers.flatten(),
        tf.layers.dense({ units: 4 }),
      ],
    });
    const xs = Float32Array.from({ length: 4 * 12 * 12 * 8 }, () => rand() * 2 - 1);
    const used: Bf16Shadow[] = [];
    const step = (fresh: boolean) => {
      addon.setPrecision('bf16');
      const shadowOf = OUTPUT_POOL.shadowOf;
      OUTPUT_POOL.shadowOf = values => {
        if (fresh) return undefined; // every convolution converts its inputs itself
        const s = shadowOf.call(OUTPUT_POOL, values);
        if (s) used.push(s);
        return s;
      };
      try {
        return tf.tidy(() => {
          const x = tf.tensor4d(xs, [4, 12, 12, 8]);
          const { value, grads } = tf.variableGrads(() => tf.sum(tf.square(model.apply(x) as tf.Tensor)) as tf.Scalar);
          return [value, ...Object.values(grads)].map(g => Float32Array.from(g.dataSync()));
        });
      } finally {
        OUTPUT_POOL.shadowOf = shadowOf;
        addon.setPrecision('fp32');
      }
    };
    const withShadows = step(false),
      without = step(true);
    t.ok(used.filter(s => s.filled).length >= 4, `shadows were filled and read (${used.length} asked for)`);
    t.equal(withShadows.length, without.length);
    withShadows.forEach((v, i) => t.ok(identical(v, without[i]), `output ${i}: the same bits`));
    model.dispose();
    t.end();
  });
}
