/**
 * The small dense linear algebra of PowerSGD over row-major Float32Arrays:
 * products with a thin matrix (accumulated in float64, stored in float32),
 * Gram-Schmidt orthonormalisation of columns (float32 or float64), and
 * seeded Gaussian matrices. Plain loops in a fixed order, so equal inputs give equal bits on every rank.
 */

/** p[n×r] = m[n×c] · q[c×r]. */
export function multiply(m: Float32Array, q: Float32Array, p: Float32Array, n: number, c: number, r: number): void {
  const row = new Float64Array(r);
  for (let i = 0; i < n; i++) {
    row.fill(0);
    const base = i * c;
    for (let j = 0; j < c; j++) {
      const v = m[base + j];
      if (v === 0) continue;
      for (let k = 0; k < r; k++) row[k] += v * q[j * r + k];
    }
    for (let k = 0; k < r; k++) p[i * r + k] = row[k];
  }
}

/** q[c×r] = m[n×c]ᵀ · p[n×r]. */
export function multiplyTransposed(m: Float32Array, p: Floats, q: Float32Array, n: number, c: number, r: number): void {
  const acc = new Float64Array(c * r);
  for (let i = 0; i < n; i++) {
    const base = i * c;
    for (let k = 0; k < r; k++) {
      const pk = p[i * r + k];
      if (pk === 0) continue;
      for (let j = 0; j < c; j++) acc[j * r + k] += m[base + j] * pk;
    }
  }
  for (let x = 0; x < c * r; x++) q[x] = acc[x];
}

/** Float32 or float64 storage. */
export type Floats = Float32Array | Float64Array;

/** m[n×c] = p[n×r] · q[c×r]ᵀ. */
export function multiplyByTransposed(p: Floats, q: Float32Array, m: Float32Array, n: number, c: number, r: number): void {
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < c; j++) {
      let s = 0;
      for (let k = 0; k < r; k++) s += p[i * r + k] * q[j * r + k];
      m[i * c + j] = s;
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
    const radius = Math.sqrt(-2 * Math.log(uniform())), angle = 2 * Math.PI * uniform();
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
