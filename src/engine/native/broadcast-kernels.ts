/**
 * Broadcasting arithmetic (Add, Sub, Multiply, RealDiv, Minimum, Maximum),
 * comparisons (Greater, GreaterEqual, Less, LessEqual, Equal) and reductions over
 * any axes (Sum, Mean) as flat loops on the native engine. tfjs's cpu kernels
 * compute a broadcast element by element through index ↔ coordinates
 * conversions (~20 ms for the 16x16x16x32 gradient of a global average
 * pooling here) and reduce over middle axes after a transpose; these walk the
 * output in memory order with per-operand strides (0 along a broadcast axis).
 * Same float operations in the same order as the stock kernels: each element
 * computed in double and stored as float32; a sum adds its elements in their
 * row-major order in double; a mean divides each element by the count first
 * (float32), as tfjs's Mean does. Float32 only; anything else falls back.
 *
 * @example
 * broadcastBinary('Multiply', [16, 1, 1, 32], a, [16, 16, 16, 32], b); // { shape: [16, 16, 16, 32], values }
 */
import { OUTPUT_POOL } from './output-pool.js';
import type { NativeAddon } from './native-addon.js';

/** The addon's loops for the same walks (native/src/broadcast.cc): every op here, Sum and Mean. */
export type FlatLoops = Pick<NativeAddon, 'binaryStrided' | 'reduceStrided'>;
const NATIVE_OPS: Record<BinaryOp, number> = {
  Add: 0,
  Sub: 1,
  Multiply: 2,
  RealDiv: 3,
  Minimum: 4,
  Maximum: 5,
  Greater: 6,
  GreaterEqual: 7,
  Less: 8,
  LessEqual: 9,
  Equal: 10,
};
export type ArithmeticOp = 'Add' | 'Sub' | 'Multiply' | 'RealDiv' | 'Minimum' | 'Maximum';
export type ComparisonOp = 'Greater' | 'GreaterEqual' | 'Less' | 'LessEqual' | 'Equal';
export type BinaryOp = ArithmeticOp | ComparisonOp;
export const ARITHMETIC_OPS: readonly ArithmeticOp[] = ['Add', 'Sub', 'Multiply', 'RealDiv', 'Minimum', 'Maximum'];
export const COMPARISON_OPS: readonly ComparisonOp[] = ['Greater', 'GreaterEqual', 'Less', 'LessEqual', 'Equal'];

/** Arithmetic gives float32 values; a comparison gives tfjs's bool tensor values (0/1 bytes). */
export interface FlatResult {
  shape: number[];
  values: Float32Array | Uint8Array;
  dtype: 'float32' | 'bool';
}

/**
 * out[o + k] = a[ia + k·sa] ∘ b[ib + k·sb] for k < n: one inner row, one loop per operation (each stays monomorphic).
 */
type RowLoop = (
  out: Float32Array | Uint8Array,
  o: number,
  a: Float32Array,
  ia: number,
  sa: number,
  b: Float32Array,
  ib: number,
  sb: number,
  n: number,
) => void;

const ROWS: Record<BinaryOp, RowLoop> = {
  Add: (out, o, a, ia, sa, b, ib, sb, n) => {
    for (let k = 0; k < n; k++, ia += sa, ib += sb) out[o + k] = a[ia] + b[ib];
  },
  Sub: (out, o, a, ia, sa, b, ib, sb, n) => {
    for (let k = 0; k < n; k++, ia += sa, ib += sb) out[o + k] = a[ia] - b[ib];
  },
  Multiply: (out, o, a, ia, sa, b, ib, sb, n) => {
    for (let k = 0; k < n; k++, ia += sa, ib += sb) out[o + k] = a[ia] * b[ib];
  },
  RealDiv: (out, o, a, ia, sa, b, ib, sb, n) => {
    for (let k = 0; k < n; k++, ia += sa, ib += sb) out[o + k] = a[ia] / b[ib];
  },
  Minimum: (out, o, a, ia, sa, b, ib, sb, n) => {
    for (let k = 0; k < n; k++, ia += sa, ib += sb) out[o + k] = Math.min(a[ia], b[ib]);
  },
  Maximum: (out, o, a, ia, sa, b, ib, sb, n) => {
    for (let k = 0; k < n; k++, ia += sa, ib += sb) out[o + k] = Math.max(a[ia], b[ib]);
  },
  Greater: (out, o, a, ia, sa, b, ib, sb, n) => {
    for (let k = 0; k < n; k++, ia += sa, ib += sb) out[o + k] = a[ia] > b[ib] ? 1 : 0;
  },
  GreaterEqual: (out, o, a, ia, sa, b, ib, sb, n) => {
    for (let k = 0; k < n; k++, ia += sa, ib += sb) out[o + k] = a[ia] >= b[ib] ? 1 : 0;
  },
  Less: (out, o, a, ia, sa, b, ib, sb, n) => {
    for (let k = 0; k < n; k++, ia += sa, ib += sb) out[o + k] = a[ia] < b[ib] ? 1 : 0;
  },
  LessEqual: (out, o, a, ia, sa, b, ib, sb, n) => {
    for (let k = 0; k < n; k++, ia += sa, ib += sb) out[o + k] = a[ia] <= b[ib] ? 1 : 0;
  },
  Equal: (out, o, a, ia, sa, b, ib, sb, n) => {
    for (let k = 0; k < n; k++, ia += sa, ib += sb) out[o + k] = a[ia] === b[ib] ? 1 : 0;
  },
};

/** Row-major strides of `shape` aligned to `rank` dims, 0 where the dim is 1 (broadcast). */
function broadcastStrides(shape: readonly number[], rank: number): number[] {
  const padded = [...Array<number>(rank - shape.length).fill(1), ...shape];
  const strides = Array<number>(rank).fill(0);
  for (let i = rank - 1, s = 1; i >= 0; i--) {
    strides[i] = padded[i] === 1 ? 0 : s;
    s *= padded[i];
  }
  return strides;
}

/** The broadcast shape of a and b, or undefined when they do not broadcast (the stock kernel reports it). */
function broadcastShape(a: readonly number[], b: readonly number[]): number[] | undefined {
  const rank = Math.max(a.length, b.length),
    out: number[] = [];
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1,
      db = b[b.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) return undefined;
    out.push(da === 1 ? db : da);
  }
  return out;
}

/** Visits the rows of `shape` (all axes but the last) in memory order, with each strided operand's offset. */
function forEachRow(
  shape: readonly number[],
  strides: number[][],
  visit: (row: number, offsets: number[]) => void,
): void {
  const rank = shape.length,
    operands = strides.length,
    rows = shape.slice(0, -1).reduce((p, d) => p * d, 1);
  const index = new Array<number>(Math.max(0, rank - 1)).fill(0),
    offsets = new Array<number>(operands).fill(0);
  for (let row = 0; row < rows; row++) {
    visit(row, offsets);
    for (let axis = rank - 2; axis >= 0; axis--) {
      // the odometer: next row (plain loops: a closure per row cost more than a row of arithmetic)
      index[axis]++;
      for (let k = 0; k < operands; k++) offsets[k] += strides[k][axis];
      if (index[axis] < shape[axis]) break;
      for (let k = 0; k < operands; k++) offsets[k] -= strides[k][axis] * shape[axis];
      index[axis] = 0;
    }
  }
}

/** a ∘ b with numpy broadcasting, or undefined when the shapes do not broadcast. */
export function broadcastBinary(
  op: BinaryOp,
  aShape: readonly number[],
  a: Float32Array,
  bShape: readonly number[],
  b: Float32Array,
  native?: FlatLoops,
): FlatResult | undefined {
  const shape = broadcastShape(aShape, bShape);
  if (!shape) return undefined;
  const size = shape.reduce((p, d) => p * d, 1),
    rank = shape.length,
    row = ROWS[op];
  const dtype = (COMPARISON_OPS as readonly string[]).includes(op) ? 'bool' : 'float32';
  if (native && rank >= 1 && rank <= 8) {
    const values = dtype === 'bool' ? new Uint8Array(size) : OUTPUT_POOL.take(size, false); // written whole
    const [sa, sb] = [broadcastStrides(aShape, rank), broadcastStrides(bShape, rank)];
    native.binaryStrided(NATIVE_OPS[op], values, a, sa, b, sb, shape);
    return { shape, values, dtype };
  }
  const values = dtype === 'bool' ? new Uint8Array(size) : OUTPUT_POOL.take(size);
  const lastOnly = (s: readonly number[]) => s.slice(0, -1).every(d => d === 1);
  if (rank === 0) row(values, 0, a, 0, 0, b, 0, 0, 1);
  else if (size === 0) {
    // nothing to compute
  } else if (a.length === size && b.length === size) {
    row(values, 0, a, 0, 1, b, 0, 1, size); // the same shape: one row
  } else if (
    shape[rank - 1] > 1 &&
    (lastOnly(aShape) || lastOnly(bShape)) &&
    (a.length === size || b.length === size)
  ) {
    // a bias along the last axis (or a scalar): contiguous rows of the full operand against one row of the other
    const n = shape[rank - 1],
      sa = a.length === size ? n : 0,
      sb = b.length === size ? n : 0,
      ka = a.length === 1 ? 0 : 1,
      kb = b.length === 1 ? 0 : 1;
    for (let o = 0; o < size; o += n) row(values, o, a, (o / n) * sa, ka, b, (o / n) * sb, kb, n);
  } else {
    const sa = broadcastStrides(aShape, rank),
      sb = broadcastStrides(bShape, rank),
      n = shape[rank - 1];
    const ka = sa[rank - 1],
      kb = sb[rank - 1];
    forEachRow(shape, [sa, sb], (r, offsets) => row(values, r * n, a, offsets[0], ka, b, offsets[1], kb, n));
  }
  return { shape, values, dtype };
}

/**
 * Sum (or mean: each element divided by the count first, as tfjs) of x over `axes`, keeping the other axes in order.
 */
export function reduceAxes(
  kind: 'sum' | 'mean',
  shape: readonly number[],
  x: Float32Array,
  axes: readonly number[],
  keepDims: boolean,
  native?: FlatLoops,
): FlatResult {
  const reduced = new Set(axes);
  const kept = shape.map((d, i) => (reduced.has(i) ? 1 : d));
  const count = shape.reduce((p, d, i) => (reduced.has(i) ? p * d : p), 1);
  const outSize = kept.reduce((p, d) => p * d, 1);
  const rank = shape.length;
  const outShape = keepDims ? kept : shape.filter((_, i) => !reduced.has(i));
  if (native && rank >= 1 && rank <= 8) {
    const values = OUTPUT_POOL.take(outSize, false), // written whole
      so = broadcastStrides(kept, rank).map((s, i) => (reduced.has(i) ? 0 : s));
    native.reduceStrided(kind === 'mean', x, [...shape], so, values, outSize, count);
    return { shape: outShape, values, dtype: 'float32' };
  }
  const acc = new Float64Array(outSize);
  if (rank > 0 && x.length > 0) {
    const so = broadcastStrides(kept, rank).map((s, i) => (reduced.has(i) ? 0 : s)),
      n = shape[rank - 1],
      step = so[rank - 1];
    forEachRow(shape, [so], (r, [o]) => {
      const base = r * n;
      if (kind === 'sum') for (let k = 0, oo = o; k < n; k++, oo += step) acc[oo] += x[base + k];
      else for (let k = 0, oo = o; k < n; k++, oo += step) acc[oo] += Math.fround(x[base + k] / count);
    });
  }
  return { shape: outShape, values: Float32Array.from(acc), dtype: 'float32' };
}
