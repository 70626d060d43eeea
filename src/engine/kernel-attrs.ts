/** Readers for tfjs kernel attributes, shared by tandem's wasm/cpu kernels and the native ones. */

/** [h, w] from a number or a pair (strides, dilations); `fallback` for both when absent. */
export function pair(v: unknown, fallback: number): [number, number] {
  if (v === undefined || v === null) return [fallback, fallback];
  if (typeof v === 'number') return [v, v];
  const a = v as number[];
  return [a[0], a[1] ?? a[0]];
}
