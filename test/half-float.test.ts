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
