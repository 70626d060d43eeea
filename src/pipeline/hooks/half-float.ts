/**
 * IEEE half precision (fp16) and bfloat16 (bf16) as 16-bit codes, rounded to
 * nearest even, and the packing of two codes per float32 word (the
 * transports move Float32Arrays; copying one Float32Array into another keeps
 * the bits, NaN patterns included, so packed words cross intact).
 */

export type HalfFormat = 'fp16' | 'bf16';

/** Largest finite fp16. */
export const FP16_MAX = 65504;

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The fp16 code of a float32 (round to nearest even; beyond ±65504 gives ±Infinity). */
export function toFp16(x: number): number {
  f32[0] = x;
  const bits = u32[0];
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  let mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // subnormal fp16
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1),
      mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && half & 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half++; // a carry into the exponent is right (up to Infinity)
  return sign | half;
}

/** The bf16 code of a float32: its top 16 bits, rounded to nearest even (NaN stays NaN). */
export function toBf16(x: number): number {
  f32[0] = x;
  const bits = u32[0];
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) return (bits >>> 16) | 0x40;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

function fp16Value(h: number): number {
  const sign = h & 0x8000 ? -1 : 1,
    exp = (h >>> 10) & 0x1f,
    m = h & 0x3ff;
  if (exp === 0) return sign * m * 2 ** -24;
  if (exp === 31) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (exp - 15);
}

/**
 * Every code's float32 value, per format (exact: every fp16 and bf16 value is a float32), built on first use: every
 * comm thread loads this module, and only a run with a compressing hook reads a table.
 */
const DECODE: Partial<Record<HalfFormat, Float32Array>> = {};

function buildTable(format: HalfFormat): Float32Array {
  switch (format) {
    case 'fp16':
      return Float32Array.from({ length: 65536 }, (_, h) => fp16Value(h));
    case 'bf16': {
      const t = new Uint32Array(65536);
      for (let h = 0; h < 65536; h++) t[h] = h << 16;
      return new Float32Array(t.buffer);
    }
    default: {
      const never: never = format;
      throw new Error(`unknown half format ${String(never)}`);
    }
  }
}

export function decodeTable(format: HalfFormat): Float32Array {
  return (DECODE[format] ??= buildTable(format));
}

/** Float32 words needed to hold n 16-bit codes. */
export function packedWords(n: number): number {
  return Math.ceil(n / 2);
}

/**
 * Encodes `values` into `packed` (two codes per word, little-endian halves) and writes what the codes decode to
 * into `sent` (may be `values`). Finite fp16 values beyond ±65504 saturate to ±65504.
 */
export function encodeHalves(format: HalfFormat, values: Float32Array, packed: Float32Array, sent: Float32Array): void {
  const codes = new Uint16Array(packed.buffer, packed.byteOffset, packed.length * 2);
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const decode = decodeTable(format);
  if (format === 'fp16') encodeFp16Codes(bits, codes);
  else encodeBf16Codes(bits, codes);
  for (let i = 0; i < values.length; i++) sent[i] = decode[codes[i]];
  if (values.length % 2 === 1) codes[values.length] = 0;
}

/**
 * codes[i] = toFp16 of the float32 whose bits are bits[i], finite values beyond ±65504 saturated to ±65504: toFp16's
 * arithmetic on the bits in place (no call, no scratch float per value), the same codes (test/compress-hooks.test.ts).
 */
function encodeFp16Codes(bits: Uint32Array, codes: Uint16Array): void {
  for (let i = 0; i < bits.length; i++) {
    const b = bits[i];
    const sign = (b >>> 16) & 0x8000,
      exp = (b >>> 23) & 0xff;
    let mant = b & 0x7fffff,
      h: number;
    if (exp === 0xff) h = 0x7c00 | (mant ? 0x200 : 0);
    else {
      const e = exp - 112; // exp - 127 + 15
      if (e >= 0x1f)
        h = 0x7bff; // beyond 65504: saturated
      else if (e <= 0) {
        if (e < -10) h = 0;
        else {
          mant |= 0x800000;
          const shift = 14 - e,
            rem = mant & ((1 << shift) - 1),
            mid = 1 << (shift - 1);
          h = mant >>> shift;
          if (rem > mid || (rem === mid && h & 1)) h++;
        }
      } else {
        const rem = mant & 0x1fff;
        h = (e << 10) | (mant >>> 13);
        if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
        if (h >= 0x7c00) h = 0x7bff; // rounded past 65504: saturated
      }
    }
    codes[i] = sign | h;
  }
}

/** codes[i] = toBf16 of the float32 whose bits are bits[i] (the same arithmetic in place). */
function encodeBf16Codes(bits: Uint32Array, codes: Uint16Array): void {
  for (let i = 0; i < bits.length; i++) {
    const b = bits[i];
    codes[i] =
      (b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0
        ? (b >>> 16) | 0x40
        : ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
  }
}

/**
 * `packed` = the codes of gradient + residual; `sent` = what they decode to; the residual becomes
 * gradient + residual − sent (0 where either is not finite). Without a residual, the gradient alone (`corrected`
 * unused).
 */
export function compressWithFeedback(
  format: HalfFormat,
  gradient: Float32Array,
  residual: Float32Array | undefined,
  corrected: Float32Array,
  sent: Float32Array,
  packed: Float32Array,
): void {
  if (!residual) {
    encodeHalves(format, gradient, packed, sent);
    return;
  }
  for (let i = 0; i < gradient.length; i++) corrected[i] = gradient[i] + residual[i];
  encodeHalves(format, corrected, packed, sent);
  for (let i = 0; i < gradient.length; i++) {
    const left = corrected[i] - sent[i];
    residual[i] = Number.isFinite(left) ? left : 0;
  }
}

/**
 * out[i] = the mean over `size` ranks of code i of each rank's part of `gathered` (packedWords(out.length) words
 * per rank, rank after rank): rank 0's value, then each other rank's added in rank order (float32 rounding at each
 * addition), then divided by `size` (rounded to float32).
 */
export function meanOfDecoded(format: HalfFormat, gathered: Float32Array, size: number, out: Float32Array): void {
  const words = packedWords(out.length),
    decode = decodeTable(format);
  const first = new Uint16Array(gathered.buffer, gathered.byteOffset, out.length);
  for (let i = 0; i < out.length; i++) out[i] = decode[first[i]];
  for (let r = 1; r < size; r++) addDecoded(format, gathered.subarray(r * words, (r + 1) * words), out);
  if (size > 1) for (let i = 0; i < out.length; i++) out[i] /= size;
}

/** out[i] += the value of code i of `packed` (float32 rounding at each addition), for i < out.length. */
export function addDecoded(format: HalfFormat, packed: Float32Array, out: Float32Array): void {
  const codes = new Uint16Array(packed.buffer, packed.byteOffset, packed.length * 2);
  const decode = decodeTable(format);
  for (let i = 0; i < out.length; i++) out[i] += decode[codes[i]];
}
