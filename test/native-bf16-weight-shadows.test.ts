// Weights' bf16 shadows (src/engine/native/bf16-shadows.ts): within a training step's scope (the native engine's
// stepScope) a matmul casts a weight once, for the forward, and the data gradient reads that cast in transposed order.
// Checked here:
// - the addon: a matmul with shadows gives the bits of one without, for every transposition, on inputs holding NaN,
//   ±Infinity, ±0, subnormals and ties; a shadow filled by a forward serves the transposed product; a filled shadow
//   is read (a wrong one changes the answer), so staleness would show;
// - the scope: a dense net's step gives the same bits scoped as not; the weights' shadows were filled and read; none
//   outside the scope; a weight changed in place between two scoped steps (as the comm thread updates it) is cast
//   afresh; in fp32 the scope keeps nothing.
// Skipped when the addon is not built (failed with TANDEM_REQUIRE_NATIVE=1), or when oneDNN has no bf16 kernel here.
import t from 'tap';
import { awkward, startBf16OrSkip } from './fixtures/bf16-gate.js';
import * as tf from '@tensorflow/tfjs';
import { identical } from './fixtures/native-compare.js';
import type { NativeAddon } from '../src/engine/native/native-addon.js';
import { WEIGHT_SHADOWS } from '../src/engine/native/bf16-shadows.js';
import { NATIVE_ENGINE } from '../src/engine/engines/native-engine.js';
import { denseNet, denseStep } from './fixtures/dense-step.js';

const addon = await startBf16OrSkip();
if (addon) registerTests(addon);

function registerTests(addon: NativeAddon) {
  t.teardown(() => addon.setPrecision('fp32'));

  t.test('matmul: shadows give the bits of no shadows, for every transposition, and serve the transposed read', t => {
    addon.setPrecision('bf16');
    const [M, K, N] = [5, 24, 40];
    for (const ta of [false, true]) {
      for (const tb of [false, true]) {
        const a = awkward(M * K, 1),
          b = awkward(K * N, 2);
        const plain = new Float32Array(M * N),
          shadowed = new Float32Array(M * N);
        addon.matmul(a, b, null, plain, 1, 1, M, K, N, ta, tb, 0, 0);
        const as = new Uint16Array(a.length),
          bs = new Uint16Array(b.length);
        const filled = addon.matmul(a, b, null, shadowed, 1, 1, M, K, N, ta, tb, 0, 0, as, false, bs, false);
        t.equal(filled, 3, `ta ${ta} tb ${tb}: both shadows filled`);
        t.ok(identical(shadowed, plain), `ta ${ta} tb ${tb}: the same bits`);
        // b's cast, filled above, read as b transposed: [K, N] is [N, K] with the other flag
        const again = new Float32Array(M * K),
          fresh = new Float32Array(M * K);
        const dy = awkward(M * N, 3);
        addon.matmul(dy, b, null, fresh, 1, 1, M, N, K, false, !tb, 0, 0);
        addon.matmul(dy, b, null, again, 1, 1, M, N, K, false, !tb, 0, 0, null, false, bs, true);
        t.ok(identical(again, fresh), `ta ${ta} tb ${tb}: the filled shadow serves the transposed product`);
        const wrong = new Float32Array(M * K);
        addon.matmul(dy, b, null, wrong, 1, 1, M, N, K, false, !tb, 0, 0, null, false, new Uint16Array(b.length), true);
        t.notOk(identical(wrong, fresh), 'a filled shadow is what is read');
      }
    }
    addon.setPrecision('fp32');
    t.end();
  });

  const net = denseNet;
  const step = denseStep;
  const held = (v: tf.LayerVariable) =>
    (tf.backend() as unknown as { data: { get(id: object): { values: Float32Array } } }).data.get(v.read().dataId)
      .values;

  t.test('a dense net step in bf16: the same bits in a step scope as without; weights cast once', t => {
    addon.setPrecision('bf16');
    const model = net();
    const shadowOf = WEIGHT_SHADOWS.shadowOf;
    let read = 0;
    WEIGHT_SHADOWS.shadowOf = values => {
      const s = shadowOf.call(WEIGHT_SHADOWS, values);
      if (s?.filled) read++;
      return s;
    };
    let scoped: Float32Array[], plain: Float32Array[];
    try {
      scoped = step(model, true);
      plain = step(model, false);
    } finally {
      WEIGHT_SHADOWS.shadowOf = shadowOf;
    }
    t.equal(read, 2, "each dense kernel's cast read again by its data gradient (the first layer has none)");
    scoped.forEach((v, i) => t.ok(identical(v, plain[i]), `output ${i}: the same bits`));
    t.equal(WEIGHT_SHADOWS.shadowOf(held(model.layers[0].weights[0])), undefined, 'no shadow outside the scope');

    // a weight changed in place between steps, as the comm thread's update does: the next step casts it afresh
    for (const w of model.trainableWeights) held(w).forEach((v, i, a) => (a[i] = v * 0.75 + 0.01));
    const after = step(model, true),
      afterPlain = step(model, false);
    after.forEach((v, i) => t.ok(identical(v, afterPlain[i]), `after an in-place update, output ${i}: the same bits`));
    t.notOk(identical(after[0], scoped[0]), 'the update changed the loss');
    model.dispose();
    addon.setPrecision('fp32');
    t.end();
  });

  t.test('fp32: the step scope keeps nothing', t => {
    addon.setPrecision('fp32');
    const model = net();
    const end = NATIVE_ENGINE.stepScope!(tf, model);
    t.equal(WEIGHT_SHADOWS.shadowOf(held(model.layers[0].weights[0])), undefined, 'no shadow');
    end();
    model.dispose();
    t.end();
  });
}
