// The addon's float32 -> bf16 cast (native/src/bf16-cast.cc), which fills the convolutions' and matmuls' bf16 inputs:
// AVX512-BF16's instruction where the CPU has it, else integer steps. Both paths must give the bits of the rule
// written out here in JS: round to nearest even, a subnormal to a zero of its sign, a NaN made quiet (its top bits
// kept). Checked on every exponent and sign with the mantissas where rounding turns, NaN payloads, subnormals and
// infinities, a million random bit patterns, and lengths and offsets that leave the 32-wide loop a tail.
// Skipped when the addon is not built (failed with TANDEM_REQUIRE_NATIVE=1).
import t from 'tap';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { prng } from '../src/data/synthetic-images.js';

/** The rule, on a float32's bits. */
function bf16Of(u: number): number {
  const abs = u & 0x7fffffff;
  if (abs > 0x7f800000) return (u >>> 16) | 0x40;
  if (abs < 0x00800000) return (u >>> 16) & 0x8000;
  return (u + 0x7fff + ((u >>> 16) & 1)) >>> 16;
}

/** Every sign and exponent with the mantissas around each rounding boundary, then random patterns. */
function patterns(random: number): Uint32Array {
  const mantissas = [0, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x10000, 0x17fff, 0x18000, 0x18001, 0x3fffff, 0x400000];
  mantissas.push(0x400001, 0x7f7fff, 0x7f8000, 0x7f8001, 0x7fffff);
  const out: number[] = [];
  for (let sign = 0; sign < 2; sign++)
    for (let e = 0; e < 256; e++) for (const m of mantissas) out.push(((sign << 31) | (e << 23) | m) >>> 0);
  const rand = prng(7);
  for (let i = 0; i < random; i++) out.push((rand() * 2 ** 32) >>> 0);
  return Uint32Array.from(out);
}

const native = loadNativeAddon();
if (!native.loaded) {
  if (process.env.TANDEM_REQUIRE_NATIVE === '1') t.fail(`native addon required: ${native.reason}`);
  else t.comment(`skipped: ${native.reason}`);
} else {
  const addon = native.addon;
  const bits = patterns(1 << 20);
  const values = new Float32Array(bits.buffer);
  const expected = Uint16Array.from(bits, bf16Of);

  t.test('both paths give the rule on every kind of float32', t => {
    for (const path of ['auto', 'portable'] as const) {
      const out = new Uint16Array(values.length);
      const taken = addon.castToBf16(values, out, path);
      t.comment(`${path}: ${taken}`);
      let wrong = 0;
      for (let i = 0; i < out.length; i++) if (out[i] !== expected[i]) wrong++;
      t.equal(wrong, 0, `${path} (${taken}): ${values.length} values`);
    }
    t.end();
  });

  t.test('lengths and offsets that leave a tail', t => {
    let wrong = 0;
    for (let offset = 0; offset < 3; offset++)
      for (let n = 0; n <= 70; n++) {
        const src = values.subarray(offset * 1001, offset * 1001 + n);
        const out = new Uint16Array(n + 4).fill(0xabcd);
        addon.castToBf16(src, out.subarray(1, 1 + n), 'auto');
        for (let i = 0; i < n; i++) if (out[1 + i] !== expected[offset * 1001 + i]) wrong++;
        if (out[0] !== 0xabcd || out[1 + n] !== 0xabcd) wrong++; // nothing written outside
      }
    t.equal(wrong, 0);
    t.end();
  });

  t.test('refuses a wrong path or a short destination', t => {
    t.throws(() => addon.castToBf16(values, new Uint16Array(values.length), 'fast' as 'auto'), /path must be/);
    t.throws(() => addon.castToBf16(values, new Uint16Array(3), 'auto'), /too short/);
    t.end();
  });
}
