/**
 * The small dense linear algebra of PowerSGD over row-major Float32Arrays:
 * products with a thin matrix (accumulated in float64, stored in float32),
 * Gram-Schmidt orthonormalisation of columns (float32 or float64), and
 * seeded Gaussian matrices. Plain loops in a fixed order, so equal inputs give equal bits on every rank.
 */

/**
 * p[n×r] = m[n×c] · q[c×r]. Each p[i][k] is the sum over j in order (zeros of m skipped), in float64; the loop keeps
 * up to eight of them in locals at once (independent chains of additions), so the bits are those of the plain loop.
 */
export function multiply(m: Float32Array, q: Float32Array, p: Float32Array, n: number, c: number, r: number): void {
  for (let i = 0; i < n; i++) {
    const base = i * c;
    let k = 0;
    for (; k + 8 <= r; k += 8) multiplyEight(m, q, p, i, k, c, r);
    for (; k + 4 <= r; k += 4) multiplyFour(m, q, p, i, k, c, r);
    for (; k < r; k++) {
      let a = 0;
      for (let j = 0; j < c; j++) {
        const v = m[base + j];
        if (v !== 0) a += v * q[j * r + k];
      }
      p[i * r + k] = a;
    }
  }
}

/** multiply's p[i][k..k+7]: eight sums over j in order, in float64 locals (one pass over row i of m). */
function multiplyEight(m: Float32Array, q: Float32Array, p: Float32Array, i: number, k: number, c: number, r: number) {
  const base = i * c;
  let a0 = 0,
    a1 = 0,
    a2 = 0,
    a3 = 0,
    a4 = 0,
    a5 = 0,
    a6 = 0,
    a7 = 0;
  for (let j = 0; j < c; j++) {
    const v = m[base + j];
    if (v === 0) continue;
    const o = j * r + k;
    a0 += v * q[o];
    a1 += v * q[o + 1];
    a2 += v * q[o + 2];
    a3 += v * q[o + 3];
    a4 += v * q[o + 4];
    a5 += v * q[o + 5];
    a6 += v * q[o + 6];
    a7 += v * q[o + 7];
  }
  const out = i * r + k;
  p[out] = a0;
  p[out + 1] = a1;
  p[out + 2] = a2;
  p[out + 3] = a3;
  p[out + 4] = a4;
  p[out + 5] = a5;
  p[out + 6] = a6;
  p[out + 7] = a7;
}

/** multiply's p[i][k..k+3]: four sums over j in order, in float64 locals. */
function multiplyFour(m: Float32Array, q: Float32Array, p: Float32Array, i: number, k: number, c: number, r: number) {
  const base = i * c;
  let a0 = 0,
    a1 = 0,
    a2 = 0,
    a3 = 0;
  for (let j = 0; j < c; j++) {
    const v = m[base + j];
    if (v === 0) continue;
    const o = j * r + k;
    a0 += v * q[o];
    a1 += v * q[o + 1];
    a2 += v * q[o + 2];
    a3 += v * q[o + 3];
  }
  const out = i * r + k;
  p[out] = a0;
  p[out + 1] = a1;
  p[out + 2] = a2;
  p[out + 3] = a3;
}

/**
 * q[c×r] = m[n×c]ᵀ · p[n×r]. Each q[j][k] is the sum over i in order (zeros of p skipped), in float64; four columns of
 * p at a time when none of the four is zero in row i (else one by one, skipping the zeros), so the bits are the plain
 * loop's.
 */
export function multiplyTransposed(m: Float32Array, p: Floats, q: Float32Array, n: number, c: number, r: number): void {
  const acc = new Float64Array(c * r);
  for (let i = 0; i < n; i++) {
    const base = i * c;
    let k = 0;
    for (; k + 4 <= r; k += 4) {
      const p0 = p[i * r + k],
        p1 = p[i * r + k + 1],
        p2 = p[i * r + k + 2],
        p3 = p[i * r + k + 3];
      if (p0 !== 0 && p1 !== 0 && p2 !== 0 && p3 !== 0) {
        for (let j = 0; j < c; j++) {
          const v = m[base + j],
            o = j * r + k;
          acc[o] += v * p0;
          acc[o + 1] += v * p1;
          acc[o + 2] += v * p2;
          acc[o + 3] += v * p3;
        }
      } else {
        for (let kk = k; kk < k + 4; kk++) accumulateColumn(m, p[i * r + kk], acc, base, c, r, kk);
      }
    }
    for (; k < r; k++) accumulateColumn(m, p[i * r + k], acc, base, c, r, k);
  }
  for (let x = 0; x < c * r; x++) q[x] = acc[x];
}

/** acc[j][k] += m[row at base][j] · pk for every j, unless pk is zero. */
function accumulateColumn(
  m: Float32Array,
  pk: number,
  acc: Float64Array,
  base: number,
  c: number,
  r: number,
  k: number,
): void {
  if (pk === 0) return;
  for (let j = 0; j < c; j++) acc[j * r + k] += m[base + j] * pk;
}

/** Float32 or float64 storage. */
export type Floats = Float32Array | Float64Array;

/**
 * m[n×c] = p[n×r] · q[c×r]ᵀ. Each m[i][j] is the sum over k in order; four outputs at a time (independent chains of
 * additions), so the bits are the plain loop's.
 */
export function multiplyByTransposed(
  p: Floats,
  q: Float32Array,
  m: Float32Array,
  n: number,
  c: number,
  r: number,
): void {
  const row = new Float64Array(r);
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < r; k++) row[k] = p[i * r + k];
    const base = i * c;
    let j = 0;
    for (; j + 4 <= c; j += 4) {
      const o0 = j * r,
        o1 = o0 + r,
        o2 = o1 + r,
        o3 = o2 + r;
      let s0 = 0,
        s1 = 0,
        s2 = 0,
        s3 = 0;
      for (let k = 0; k < r; k++) {
        const pk = row[k];
        s0 += pk * q[o0 + k];
        s1 += pk * q[o1 + k];
        s2 += pk * q[o2 + k];
        s3 += pk * q[o3 + k];
      }
      m[base + j] = s0;
      m[base + j + 1] = s1;
      m[base + j + 2] = s2;
      m[base + j + 3] = s3;
    }
    for (; j < c; j++) {
      let s = 0;
      for (let k = 0; k < r; k++) s += row[k] * q[j * r + k];
      m[base + j] = s;
    }
  }
}

/** The columns of a[n×r] made orthonormal in place (modified Gram-Schmidt; a zero column stays zero). */
export function orthonormalizeColumns(a: Floats, n: number, r: number): void {
  for (let k = 0; k < r; k++) {
    let norm = 0;
    for (let i = 0; i < n; i++) norm += a[i * r + k] * a[i * r + k];
    norm = Math.sqrt(norm);
    if (norm > 0) for (let i = 0; i < n; i++) a[i * r + k] /= norm;
    for (let l = k + 1; l < r; l++) {
      let dot = 0;
      for (let i = 0; i < n; i++) dot += a[i * r + k] * a[i * r + l];
      for (let i = 0; i < n; i++) a[i * r + l] -= dot * a[i * r + k];
    }
  }
}

/** `out` filled with standard normal draws from a generator seeded by `seed` (mulberry32, Box-Muller). */
export function seededNormals(seed: number, out: Float32Array): void {
  let s = seed >>> 0;
  const uniform = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296; // in (0, 1)
  };
  for (let i = 0; i < out.length; i += 2) {
    const radius = Math.sqrt(-2 * Math.log(uniform())),
      angle = 2 * Math.PI * uniform();
    out[i] = radius * Math.cos(angle);
    if (i + 1 < out.length) out[i + 1] = radius * Math.sin(angle);
  }
}

/** One 32-bit seed from several integers (the same on every rank). */
export function mixSeed(...parts: number[]): number {
  let h = 0x811c9dc5;
  for (const p of parts) {
    h = Math.imul(h ^ (p >>> 0), 0x01000193);
    h ^= h >>> 13;
  }
  return h >>> 0;
}
