// The native addon's all-reduce mean and optimizer updates against the JS
// loops they replace, bit for bit, on random ranges with the awkward values
// (NaN, ±Infinity, -0, subnormals, overflowing sums).
// Skipped when the addon is not built, unless TANDEM_REQUIRE_NATIVE=1 (CI).
import t from 'tap';
import { nativeAddonOrSkip } from './fixtures/native-addon-or-skip.js';
import type { NativeAddon } from '../src/engine/native/native-addon.js';
import { JS_ARITHMETIC, nativeArithmetic, type FlatArithmetic } from '../src/optim/flat-arithmetic.js';
import { flatArithmeticFor } from '../src/engine/backend.js';
import { optimizerStateSlots, type OptimizerConfig } from '../src/optim/flat-optimizer.js';
import { firstNonFiniteJs } from '../src/engine/non-finite.js';
import { prng } from '../src/data/synthetic-images.js'; // mulberry32, for shapes and values

const SPECIAL = [NaN, Infinity, -Infinity, -0, 0, 1e-40, -3e-39, 3e38, -3.3e38, 1e-30];

/** Random floats on a SharedArrayBuffer (as the device slots are), a few of them special. */
function values(n: number, r: () => number, scale = 1, specials = true): Float32Array {
  const a = new Float32Array(new SharedArrayBuffer(n * 4));
  for (let i = 0; i < n; i++)
    a[i] =
      specials && r() < 0.02
        ? SPECIAL[Math.floor(r() * SPECIAL.length)]
        : (r() - 0.5) * scale * 10 ** Math.floor(r() * 6 - 3);
  return a;
}

/** Index of the first element whose bits differ (NaN = NaN), or -1. */
function firstDifference(a: Float32Array, b: Float32Array): number {
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}

function registerTests(native: FlatArithmetic, addon: NativeAddon): void {
  t.test("firstNonFinite: native = JS, the first NaN or ±Infinity's index, or -1", async t => {
    const r = prng(11);
    let mismatches = 0,
      found = 0;
    for (let trial = 0; trial < 200; trial++) {
      const n = Math.floor(r() * 5000);
      // mostly finite (subnormals, -0, ±3e38 included); a special value in some, anywhere, in any block
      const a = values(n, r, 1, false);
      for (let k = Math.floor(r() * 3); k > 0 && n > 0; k--) a[Math.floor(r() * n)] = SPECIAL[Math.floor(r() * 10)];
      const want = firstNonFiniteJs(a);
      if (want >= 0) found++;
      if (addon.firstNonFinite(a) !== want) mismatches++;
    }
    t.equal(mismatches, 0, '200 arrays up to 5000 floats');
    t.ok(found > 40, `${found} of them hold a non-finite value`);
    const last = new Float32Array(3000);
    last[2999] = -Infinity;
    t.equal(addon.firstNonFinite(last), 2999, 'the last element of the third block');
    last[0] = NaN;
    t.equal(addon.firstNonFinite(last), 0, 'the first one');
    t.equal(addon.firstNonFinite(new Float32Array(0)), -1, 'empty');
    t.throws(() => addon.firstNonFinite(new Float64Array(4) as unknown as Float32Array), /Float32Array/);
  });

  t.test('copyFinite: the bits copied at any offset (streamed or not), the first non-finite index', async t => {
    const r = prng(13);
    let wrong = 0,
      found = 0;
    for (let trial = 0; trial < 120; trial++) {
      const n = trial < 20 ? trial : Math.floor(r() * 40_000); // short ones copy plainly; long ones stream
      const src = values(n, r, 1, false);
      for (let k = Math.floor(r() * 3); k > 0 && n > 0; k--) src[Math.floor(r() * n)] = SPECIAL[Math.floor(r() * 10)];
      const offset = Math.floor(r() * 37);
      const dst = new Float32Array(new SharedArrayBuffer((offset + n + 5) * 4)).fill(7);
      const want = firstNonFiniteJs(src);
      if (want >= 0) found++;
      const got = addon.copyFinite(src, dst, offset);
      const bytes = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
      const copiedRight = bytes(dst.subarray(offset, offset + n)).equals(bytes(src));
      const around = dst.subarray(0, offset).every(v => v === 7) && dst.subarray(offset + n).every(v => v === 7);
      if (got !== want || !copiedRight || !around) wrong++;
    }
    t.equal(wrong, 0, '120 gradients up to 40,000 floats at offsets 0-36: copied exactly, nothing else touched');
    t.ok(found > 20, `${found} of them hold a non-finite value`);
    t.throws(
      () => addon.copyFinite(new Float32Array(8), new Float32Array(8), 1),
      /dst holds 8 floats, the kernel needs 9/,
      'dst too short: named, nothing written',
    );
  });

  t.test('reduceMeanInto: native = JS, bit for bit (1-4 slots, in place or not, odd ranges)', async t => {
    const r = prng(7);
    let cases = 0,
      mismatches = 0;
    for (let trial = 0; trial < 60; trial++) {
      const n = 1 + Math.floor(r() * 5000),
        size = 1 + Math.floor(r() * 4);
      const start = Math.floor(r() * n),
        end = start + Math.floor(r() * (n - start + 1));
      const slots = Array.from({ length: size }, () => values(n, r));
      const inPlace = r() < 0.5;
      const js = slots.map(s => Float32Array.from(s)),
        nat = slots.map(s => Float32Array.from(s));
      const outJs = inPlace ? js[size - 1] : new Float32Array(n),
        outNat = inPlace ? nat[size - 1] : new Float32Array(n);
      JS_ARITHMETIC.reduceMeanInto(js, outJs, start, end);
      native.reduceMeanInto(nat, outNat, start, end);
      const d = firstDifference(outJs, outNat);
      if (d >= 0) {
        mismatches++;
        t.fail(
          `n=${n} slots=${size} [${start}, ${end}) in place ${inPlace}: element ${d}: JS ${outJs[d]} native ` +
            `${outNat[d]}`,
        );
      }
      for (let k = 0; k < size; k++)
        if (firstDifference(js[k], nat[k]) >= 0) {
          mismatches++;
          t.fail(`slot ${k} changed differently`);
        }
      cases++;
    }
    t.equal(mismatches, 0, `${cases} random reductions identical`);
  });

  const configs: OptimizerConfig[] = [
    { kind: 'sgd', lr: 0.01, momentum: 0 },
    { kind: 'sgd', lr: 0.05, momentum: 0.9 },
    { kind: 'adam', lr: 0.001, beta1: 0.9, beta2: 0.999, epsilon: 1e-7 },
    { kind: 'adam', lr: 0.3, beta1: 0.5, beta2: 0.75, epsilon: 1e-3 },
  ];
  for (const config of configs) {
    t.test(`applyUpdate ${JSON.stringify(config)}: native = JS over 6 steps (params and state)`, async t => {
      const r = prng(11);
      const n = 3000 + Math.floor(r() * 3000);
      const slots = optimizerStateSlots(config);
      const params = values(n, r),
        js = { p: Float32Array.from(params), s: Array.from({ length: slots }, () => new Float32Array(n)) };
      const nat = { p: Float32Array.from(params), s: Array.from({ length: slots }, () => new Float32Array(n)) };
      for (let step = 1; step <= 6; step++) {
        // step 3: ordinary values only, so later steps still compare finite numbers
        const grads = values(n, r, 1, step !== 3);
        const start = Math.floor(r() * 100),
          end = n - Math.floor(r() * 100);
        JS_ARITHMETIC.applyUpdate(config, js.p, grads, js.s, start, end, step);
        native.applyUpdate(config, nat.p, grads, nat.s, start, end, step);
        const dp = firstDifference(js.p, nat.p);
        t.equal(
          dp,
          -1,
          `step ${step} [${start}, ${end}): params ` +
            `identical${dp >= 0 ? ` (element ${dp}: JS ${js.p[dp]} native ${nat.p[dp]})` : ''}`,
        );
        js.s.forEach((s, k) => t.equal(firstDifference(s, nat.s[k]), -1, `step ${step}: state ${k} identical`));
      }
      const moved = js.p.filter((v, i) => Number.isFinite(v) && v !== params[i]).length;
      t.ok(moved > n / 2, `the update moved ${moved} of ${n} parameters`);
    });
  }

  t.test('flatArithmeticFor picks native only for the native backend; bad arguments name themselves', async t => {
    t.equal(flatArithmeticFor('native').name, 'native');
    t.equal(flatArithmeticFor('wasm').name, 'js');
    t.equal(flatArithmeticFor('cpu').name, 'js');
    t.throws(() => addon.reduceMean([new Float32Array(4), new Float32Array(2)], new Float32Array(4), 0, 4), {
      name: 'RangeError',
      message: /slots\[r\] holds 2 floats/,
    });
    t.throws(
      () => addon.sgdUpdate(new Float32Array(4), new Float64Array(4) as unknown as Float32Array, null, 0, 4, 0.1, 0),
      { name: 'TypeError', message: /grads must be a Float32Array/ },
    );
    t.throws(
      () =>
        addon.adamUpdate(
          new Float32Array(4),
          new Float32Array(4),
          new Float32Array(4),
          new Float32Array(4),
          3,
          1,
          0.1,
          0.9,
          0.99,
          1e-7,
          0.1,
          0.01,
        ),
      { name: 'RangeError', message: /start <= end/ },
    );
  });
}

const addon = nativeAddonOrSkip();
if (addon) registerTests(nativeArithmetic(), addon);
