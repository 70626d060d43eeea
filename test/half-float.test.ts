// fp16 and bf16 codes against their definition: every code decodes to a float32 that encodes back to it, the
// midpoint between two neighbours goes to the even one (round to nearest even), just inside goes to the nearer;
// fp16 saturates beyond ±65504 when packing; packing keeps the codes through a Float32Array copy (.set).
import t from 'tap';
import { toFp16, toBf16, decodeTable, encodeHalves, packedWords, FP16_MAX, type HalfFormat } from '../src/pipeline/hooks/half-float.js';

const encoders: Record<HalfFormat, (x: number) => number> = { fp16: toFp16, bf16: toBf16 };

for (const format of ['fp16', 'bf16'] as const) {
  t.test(`${format}: every code round-trips; midpoints round to even`, async t => {
    const decode = decodeTable(format), encode = encoders[format];
    let roundTrip = 0, ties = 0, nearer = 0, checked = 0;
    for (let h = 0; h < 0x8000; h++) { // positive codes; the sign bit is carried alone
      const v = decode[h];
      if (Number.isNaN(v)) { if (Number.isNaN(decode[encode(v)])) roundTrip++; continue; }
      if (encode(v) === h && encode(-v) === (h | 0x8000)) roundTrip++;
      const next = decode[h + 1];
      if (!Number.isFinite(next) || !Number.isFinite(v)) continue;
      const mid = (v + next) / 2; // exact in float64; a float32 when the format has fewer bits (always here)
      if (Math.fround(mid) !== mid) continue;
      checked++;
      if (encode(mid) === ((h & 1) === 0 ? h : h + 1)) ties++;
      const below = Math.fround(mid - (next - v) / 8), above = Math.fround(mid + (next - v) / 8);
      if (encode(below) === h && encode(above) === h + 1) nearer++;
    }
    t.equal(roundTrip, 0x8000, 'every positive code (and its negative) decodes and encodes back');
    t.ok(checked > 30000, `${checked} midpoints checked`);
    t.equal(ties, checked, 'ties go to the even code');
    t.equal(nearer, checked, 'values off the midpoint go to the nearer code');
  });
}

t.test('fp16 saturates finite values beyond ±65504 when packing; Infinity and NaN stay', async t => {
  const values = Float32Array.from([1e6, -70000, 65504, Infinity, -Infinity, NaN, 2 ** -30]);
  const packed = new Float32Array(packedWords(values.length)), sent = new Float32Array(values.length);
  encodeHalves('fp16', values, packed, sent);
  t.same([...sent.subarray(0, 5)], [FP16_MAX, -FP16_MAX, FP16_MAX, Infinity, -Infinity]);
  t.ok(Number.isNaN(sent[5]), 'NaN stays NaN');
  t.equal(sent[6], 0, '2^-30 is below half the smallest fp16 subnormal: 0');
});

t.test('packed words keep their codes through a Float32Array copy, NaN patterns included', async t => {
  const n = 4096;
  const values = Float32Array.from({ length: n }, (_, i) => (i % 7 === 0 ? NaN : Math.sin(i) * 10 ** ((i % 9) - 4)));
  for (const format of ['fp16', 'bf16'] as const) {
    const packed = new Float32Array(packedWords(n)), sent = new Float32Array(n);
    encodeHalves(format, values, packed, sent);
    // Force words that are float32 NaNs with payloads: codes 0xffff in the high half.
    const codes = new Uint16Array(packed.buffer);
    codes[1] = 0xffff; codes[3] = 0xff81;
    const copy = new Float32Array(packed.length);
    copy.set(packed);
    t.same(new Uint16Array(copy.buffer), codes, `${format}: the same 16-bit codes after .set`);
  }
});

// encodeHalves works on the float32 bits in place (no call per value): computed two ways, its codes against the
// scalar toFp16 / toBf16 (with fp16's saturation) over every sign and exponent × mantissas at and around each
// rounding boundary of both formats, plus random bit patterns (NaNs with payloads included).
t.test('encodeHalves gives the codes of toFp16 / toBf16 (fp16 saturated) over every exponent, the rounding boundaries and random bits', async t => {
  const patterns: number[] = [];
  const mantissas = [0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fff, 0x8000, 0x8001, 0xffff, 0x17fff, 0x18000, 0x18001,
    0x3fffff, 0x400000, 0x400001, 0x7fe000, 0x7fefff, 0x7ff000, 0x7ff001, 0x7fffff];
  for (let sign = 0; sign < 2; sign++) for (let exp = 0; exp < 256; exp++) for (const m of mantissas) patterns.push(((sign << 31) | (exp << 23) | m) >>> 0);
  for (let exp = 100; exp < 114; exp++) for (let shift = 0; shift < 24; shift++) { // fp16 subnormals: ties at every shift
    const half = 1 << shift;
    for (const m of [half - 1, half, half + 1, 3 * half, half * 5]) patterns.push(((exp << 23) | (m & 0x7fffff)) >>> 0);
  }
  let x = 0x9e3779b9;
  for (let i = 0; i < 200_000; i++) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; patterns.push(x >>> 0); }
  const values = new Float32Array(new Uint32Array(patterns).buffer);
  for (const format of ['fp16', 'bf16'] as const) {
    const packed = new Float32Array(packedWords(values.length)), sent = new Float32Array(values.length);
    encodeHalves(format, values, packed, sent);
    const codes = new Uint16Array(packed.buffer, 0, values.length);
    let differ = 0, first = '';
    for (let i = 0; i < values.length; i++) {
      let v = values[i];
      if (format === 'fp16' && Number.isFinite(v)) v = Math.max(-FP16_MAX, Math.min(FP16_MAX, v));
      const want = encoders[format](v);
      if (codes[i] !== want) { if (differ++ === 0) first = `bits 0x${patterns[i].toString(16)}: ${codes[i].toString(16)} vs ${want.toString(16)}`; }
    }
    t.equal(differ, 0, `${format}: ${values.length} values, the scalar codes${first ? ` (first: ${first})` : ''}`);
  }
});
