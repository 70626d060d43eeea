// fp16 and bf16 codes against their definition: every code decodes to a float32 that encodes back to it, the
// midpoint between two neighbours goes to the even one (round to nearest even), just inside goes to the nearer;
// fp16 saturates beyond ±65504 when packing; packing keeps the codes through a Float32Array copy (.set); the native
// addon's passes (compression with error feedback, mean of the gathered codes) give the JS's bits.
import t from 'tap';
import {
  toFp16,
  toBf16,
  decodeTable,
  encodeHalves,
  packedWords,
  FP16_MAX,
  type HalfFormat,
} from '../src/pipeline/hooks/half-float.js';
import { JS_HALF_ARITHMETIC, nativeHalfArithmetic, type HalfArithmetic } from '../src/optim/half-arithmetic.js';
import { nativeAddonOrSkip } from './fixtures/native-addon-or-skip.js';

const encoders: Record<HalfFormat, (x: number) => number> = { fp16: toFp16, bf16: toBf16 };

for (const format of ['fp16', 'bf16'] as const) {
  t.test(`${format}: every code round-trips; midpoints round to even`, async t => {
    const decode = decodeTable(format),
      encode = encoders[format];
    let roundTrip = 0,
      ties = 0,
      nearer = 0,
      checked = 0;
    for (let h = 0; h < 0x8000; h++) {
      // positive codes; the sign bit is carried alone
      const v = decode[h];
      if (Number.isNaN(v)) {
        if (Number.isNaN(decode[encode(v)])) roundTrip++;
        continue;
      }
      if (encode(v) === h && encode(-v) === (h | 0x8000)) roundTrip++;
      const next = decode[h + 1];
      if (!Number.isFinite(next) || !Number.isFinite(v)) continue;
      const mid = (v + next) / 2; // exact in float64; a float32 when the format has fewer bits (always here)
      if (Math.fround(mid) !== mid) continue;
      checked++;
      if (encode(mid) === ((h & 1) === 0 ? h : h + 1)) ties++;
      const below = Math.fround(mid - (next - v) / 8),
        above = Math.fround(mid + (next - v) / 8);
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
  const packed = new Float32Array(packedWords(values.length)),
    sent = new Float32Array(values.length);
  encodeHalves('fp16', values, packed, sent);
  t.same([...sent.subarray(0, 5)], [FP16_MAX, -FP16_MAX, FP16_MAX, Infinity, -Infinity]);
  t.ok(Number.isNaN(sent[5]), 'NaN stays NaN');
  t.equal(sent[6], 0, '2^-30 is below half the smallest fp16 subnormal: 0');
});

t.test('packed words keep their codes through a Float32Array copy, NaN patterns included', async t => {
  const n = 4096;
  const values = Float32Array.from({ length: n }, (_, i) => (i % 7 === 0 ? NaN : Math.sin(i) * 10 ** ((i % 9) - 4)));
  for (const format of ['fp16', 'bf16'] as const) {
    const packed = new Float32Array(packedWords(n)),
      sent = new Float32Array(n);
    encodeHalves(format, values, packed, sent);
    // Force words that are float32 NaNs with payloads: codes 0xffff in the high half.
    const codes = new Uint16Array(packed.buffer);
    codes[1] = 0xffff;
    codes[3] = 0xff81;
    const copy = new Float32Array(packed.length);
    copy.set(packed);
    t.same(new Uint16Array(copy.buffer), codes, `${format}: the same 16-bit codes after .set`);
  }
});

/**
 * Float32 bit patterns: every sign and exponent × mantissas at and around each rounding boundary of fp16 and bf16,
 * fp16 subnormal ties at every shift, then 200K random bit patterns (NaNs with payloads included).
 */
function boundaryPatterns(): number[] {
  const patterns: number[] = [];
  const mantissas = [
    0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fff, 0x8000, 0x8001, 0xffff, 0x17fff, 0x18000, 0x18001,
    0x3fffff, 0x400000, 0x400001, 0x7fe000, 0x7fefff, 0x7ff000, 0x7ff001, 0x7fffff,
  ];
  for (let sign = 0; sign < 2; sign++)
    for (let exp = 0; exp < 256; exp++)
      for (const m of mantissas) patterns.push(((sign << 31) | (exp << 23) | m) >>> 0);
  for (let exp = 100; exp < 114; exp++)
    for (let shift = 0; shift < 24; shift++) {
      // fp16 subnormals: ties at every shift
      const half = 1 << shift;
      for (const m of [half - 1, half, half + 1, 3 * half, half * 5])
        patterns.push(((exp << 23) | (m & 0x7fffff)) >>> 0);
    }
  let x = 0x9e3779b9;
  for (let i = 0; i < 200_000; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    patterns.push(x >>> 0);
  }
  return patterns;
}

// encodeHalves works on the float32 bits in place (no call per value): computed two ways, its codes against the
// scalar toFp16 / toBf16 (with fp16's saturation) over every sign and exponent × mantissas at and around each
// rounding boundary of both formats, plus random bit patterns (NaNs with payloads included).
t.test(
  'encodeHalves gives the codes of toFp16 / toBf16 (fp16 saturated) over every exponent, the rounding boundaries ' +
    'and random bits',
  async t => {
    const patterns = boundaryPatterns();
    const values = new Float32Array(new Uint32Array(patterns).buffer);
    for (const format of ['fp16', 'bf16'] as const) {
      const packed = new Float32Array(packedWords(values.length)),
        sent = new Float32Array(values.length);
      encodeHalves(format, values, packed, sent);
      const codes = new Uint16Array(packed.buffer, 0, values.length);
      let differ = 0,
        first = '';
      for (let i = 0; i < values.length; i++) {
        let v = values[i];
        if (format === 'fp16' && Number.isFinite(v)) v = Math.max(-FP16_MAX, Math.min(FP16_MAX, v));
        const want = encoders[format](v);
        if (codes[i] !== want) {
          if (differ++ === 0)
            first = `bits 0x${patterns[i].toString(16)}: ${codes[i].toString(16)} vs ${want.toString(16)}`;
        }
      }
      t.equal(differ, 0, `${format}: ${values.length} values, the scalar codes${first ? ` (first: ${first})` : ''}`);
    }
  },
);

// The native addon's passes against the JS loops, bit for bit (Uint32 views: NaN payloads, -0, the odd word's zero
// half included), over the boundary patterns and 200K random bits: compression without a residual, with a zero one
// (the codes of the patterns themselves), with random bits as the residual (two steps: the residual carried), at
// odd and even lengths; the mean of 1-4 ranks' codes. The inputs include places where two NaNs with different
// payloads meet in an addition (which one the sum keeps is the JS engine's choice; the addon must make the same).
const u32 = (a: Float32Array) => new Uint32Array(a.buffer, a.byteOffset, a.length);

function differences(a: Float32Array, b: Float32Array): { count: number; first: string } {
  const x = u32(a),
    y = u32(b);
  let count = 0,
    first = '';
  for (let i = 0; i < x.length; i++)
    if (x[i] !== y[i] && count++ === 0) first = ` (first at ${i}: 0x${x[i].toString(16)} vs 0x${y[i].toString(16)})`;
  return { count, first };
}

/** Places where at least two of the arrays hold NaNs with different bits. */
function nanMeetings(arrays: Float32Array[]): number {
  let count = 0;
  for (let i = 0; i < arrays[0].length; i++) {
    const nans = new Set(arrays.filter(a => Number.isNaN(a[i])).map(a => u32(a)[i]));
    if (nans.size > 1) count++;
  }
  return count;
}

interface CompressRun {
  packed: Float32Array;
  sent: Float32Array;
  residual?: Float32Array;
  corrected: Float32Array;
}

function compressTwice(
  arithmetic: HalfArithmetic,
  format: HalfFormat,
  gradient: Float32Array,
  residual0: Float32Array | undefined,
): CompressRun {
  const n = gradient.length;
  const run: CompressRun = {
    packed: new Float32Array(packedWords(n)),
    sent: new Float32Array(n),
    corrected: new Float32Array(n),
    residual: residual0?.slice(),
  };
  u32(run.packed).fill(0xdeadbeef); // the odd word's high half must be zeroed
  for (let step = 0; step < 2; step++)
    arithmetic.compress(format, gradient, run.residual, run.corrected, run.sent, run.packed);
  return run;
}

const native = nativeAddonOrSkip() ? nativeHalfArithmetic() : undefined;

t.test(
  'the native compression gives the JS bits: packed codes, sent, corrected, residual',
  { skip: native ? false : 'native addon not built' },
  async t => {
    const patterns = boundaryPatterns();
    const all = new Float32Array(new Uint32Array([...patterns, 0x3f800001]).buffer); // odd length
    let x = 0x2545f491;
    const randomBits = new Float32Array(
      new Uint32Array(
        Array.from({ length: all.length }, () => {
          x ^= x << 13;
          x ^= x >>> 17;
          x ^= x << 5;
          return x >>> 0;
        }),
      ).buffer,
    );
    const residuals: Record<string, Float32Array | undefined> = {
      none: undefined,
      zero: new Float32Array(all.length),
      random: randomBits,
    };
    for (const format of ['fp16', 'bf16'] as const) {
      for (const [kind, residual] of Object.entries(residuals)) {
        for (const n of [all.length, all.length - 1, 1, 2, 3, 1001]) {
          const gradient = all.subarray(all.length - n),
            r0 = residual?.subarray(all.length - n); // the tail: random bits and boundary cases
          const want = compressTwice(JS_HALF_ARITHMETIC, format, gradient, r0),
            got = compressTwice(native!, format, gradient, r0);
          const arrays: (keyof CompressRun)[] = residual
            ? ['packed', 'sent', 'corrected', 'residual']
            : ['packed', 'sent'];
          if (kind === 'random' && n === all.length)
            t.ok(
              nanMeetings([gradient, r0!]) > 0,
              `${nanMeetings([gradient, r0!])} places where gradient and residual are NaNs with different bits`,
            );
          for (const name of arrays) {
            const d = differences(got[name]!, want[name]!);
            if (d.count > 0 || n === all.length)
              t.equal(d.count, 0, `${format}, residual ${kind}, ${n} values: ${name} the same bits${d.first}`);
          }
        }
      }
    }
  },
);

t.test(
  "the native mean of 1-4 ranks' codes gives the JS bits",
  { skip: native ? false : 'native addon not built' },
  async t => {
    const patterns = boundaryPatterns();
    for (const format of ['fp16', 'bf16'] as const) {
      for (const n of [patterns.length + 1, 1, 3, 1001]) {
        for (let size = 1; size <= 4; size++) {
          const words = packedWords(n),
            gathered = new Float32Array(words * size);
          for (let r = 0; r < size; r++) {
            // rank r: the patterns rotated, compressed as the hook does
            const values = new Float32Array(
              new Uint32Array(Array.from({ length: n }, (_, i) => patterns[(i + r * 7919) % patterns.length])).buffer,
            );
            JS_HALF_ARITHMETIC.compress(
              format,
              values,
              undefined,
              new Float32Array(n),
              new Float32Array(n),
              gathered.subarray(r * words, (r + 1) * words),
            );
          }
          const want = new Float32Array(n),
            got = new Float32Array(n);
          if (format === 'bf16' && n > 1001 && size > 1) {
            // fp16's NaN codes all decode to one NaN
            const decoded = Array.from({ length: size }, (_, r) => {
              const v = new Float32Array(n);
              JS_HALF_ARITHMETIC.meanDecoded(format, gathered.subarray(r * words, (r + 1) * words), 1, v);
              return v;
            });
            t.ok(
              nanMeetings(decoded) > 0,
              `${format}, ${size} ranks: ${nanMeetings(decoded)} places where ranks' values are NaNs with different ` +
                `bits`,
            );
          }
          JS_HALF_ARITHMETIC.meanDecoded(format, gathered, size, want);
          native!.meanDecoded(format, gathered, size, got);
          const d = differences(got, want);
          if (d.count > 0 || n > 1001)
            t.equal(d.count, 0, `${format}, ${size} rank(s), ${n} values: the same bits${d.first}`);
        }
      }
    }
  },
);
