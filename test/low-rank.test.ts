// PowerSGD's products (src/pipeline/hooks/low-rank.ts) keep several sums in locals at once for speed; each output
// must still be the plain loop's sum, in the same order, to the bit (ranks decode the same bytes the same way).
// Computed two ways: the kernels against the plain triple loops below, on shapes whose r and c are not multiples of
// the blocking, with zeros in m and p (skipped by both), signed zeros, and Inf (0 · Inf must stay skipped).
import t from 'tap';
import { multiply, multiplyByTransposed, multiplyTransposed, seededNormals } from '../src/pipeline/hooks/low-rank.js';

function plainMultiply(m: Float32Array, q: Float32Array, n: number, c: number, r: number): Float32Array {
  const p = new Float32Array(n * r);
  for (let i = 0; i < n; i++)
    for (let k = 0; k < r; k++) {
      let a = 0;
      for (let j = 0; j < c; j++) if (m[i * c + j] !== 0) a += m[i * c + j] * q[j * r + k];
      p[i * r + k] = a;
    }
  return p;
}

function plainMultiplyTransposed(
  m: Float32Array,
  p: Float32Array | Float64Array,
  n: number,
  c: number,
  r: number,
): Float32Array {
  const q = new Float32Array(c * r);
  for (let j = 0; j < c; j++)
    for (let k = 0; k < r; k++) {
      let a = 0;
      for (let i = 0; i < n; i++) if (p[i * r + k] !== 0) a += m[i * c + j] * p[i * r + k];
      q[j * r + k] = a;
    }
  return q;
}

function plainMultiplyByTransposed(
  p: Float32Array | Float64Array,
  q: Float32Array,
  n: number,
  c: number,
  r: number,
): Float32Array {
  const m = new Float32Array(n * c);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < c; j++) {
      let s = 0;
      for (let k = 0; k < r; k++) s += p[i * r + k] * q[j * r + k];
      m[i * c + j] = s;
    }
  return m;
}

/** Normals with every `zeroEvery`-th entry a zero (alternately +0 and -0). */
function sparseNormals(seed: number, size: number, zeroEvery: number): Float32Array {
  const a = new Float32Array(size);
  seededNormals(seed, a);
  for (let i = 0; i < size; i += zeroEvery) a[i] = (i / zeroEvery) % 2 === 0 ? 0 : -0;
  return a;
}

const bits = (a: Float32Array): Uint32Array => new Uint32Array(a.buffer, a.byteOffset, a.length);

for (const [n, c, r] of [
  [9, 7, 1],
  [13, 11, 3],
  [17, 5, 4],
  [6, 23, 5],
  [21, 9, 8],
  [5, 19, 9],
  [11, 14, 12],
  [3, 2, 16],
]) {
  t.test(`n ${n}, c ${c}, r ${r}: the plain loops' bits`, async t => {
    const m = sparseNormals(n * 1000 + c, n * c, 5);
    const q = sparseNormals(c * 1000 + r, c * r, 7);
    const p = sparseNormals(r * 1000 + n, n * r, 3);
    const p64 = Float64Array.from(p, (v, i) => v * (1 + i / 1e9)); // not float32-representable: the float64 path
    const gotP = new Float32Array(n * r);
    multiply(m, q, gotP, n, c, r);
    t.same(bits(gotP), bits(plainMultiply(m, q, n, c, r)), 'multiply');
    for (const pIn of [p, p64]) {
      const gotQ = new Float32Array(c * r);
      multiplyTransposed(m, pIn, gotQ, n, c, r);
      t.same(
        bits(gotQ),
        bits(plainMultiplyTransposed(m, pIn, n, c, r)),
        `multiplyTransposed (${pIn.constructor.name})`,
      );
      const gotM = new Float32Array(n * c);
      multiplyByTransposed(pIn, q, gotM, n, c, r);
      t.same(
        bits(gotM),
        bits(plainMultiplyByTransposed(pIn, q, n, c, r)),
        `multiplyByTransposed (${pIn.constructor.name})`,
      );
    }
  });
}

t.test('a zero of m or p stays skipped next to an Inf (0 · Inf would be NaN)', async t => {
  const n = 4,
    c = 8,
    r = 4;
  const m = sparseNormals(1, n * c, 2);
  const q = sparseNormals(2, c * r, 1000);
  q[0] = Infinity; // row j = 0 of q meets m[i][0] = 0 for every even-c row start
  const p = new Float32Array(n * r);
  multiply(m, q, p, n, c, r);
  t.same(bits(p), bits(plainMultiply(m, q, n, c, r)));
  t.ok(
    p.every(v => !Number.isNaN(v)),
    'no NaN from a skipped zero',
  );
  const pz = sparseNormals(3, n * r, 2);
  const mInf = sparseNormals(4, n * c, 1000);
  mInf[0] = Infinity;
  const out = new Float32Array(c * r);
  multiplyTransposed(mInf, pz, out, n, c, r);
  t.same(bits(out), bits(plainMultiplyTransposed(mInf, pz, n, c, r)));
});
