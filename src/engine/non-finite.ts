/**
 * The first non-finite value of a gradient (NaN or ±Infinity), checked before the gradient is handed over: in the
 * native addon where it loaded (blocks tested branch-free on the exponent bits: ~10× the JS loop), else in JS.
 */
import { loadNativeAddon } from './native/native-addon.js';

/** The index of the first NaN or ±Infinity of `values`, or -1. */
export function firstNonFinite(values: Float32Array): number {
  const addon = loadNativeAddon();
  return addon.loaded ? addon.addon.firstNonFinite(values) : firstNonFiniteJs(values);
}

/** firstNonFinite without the addon (its reference: test/flat-arithmetic.test.ts compares them). */
export function firstNonFiniteJs(values: Float32Array): number {
  for (let i = 0; i < values.length; i++) if (!Number.isFinite(values[i])) return i;
  return -1;
}

/**
 * `values` copied into `dst` from `offset`, and the index of its first NaN or ±Infinity (or -1): a gradient's hand-over
 * in one call (the addon streams the copy past this core's caches, to the comm thread's). Values already there (the
 * kernel wrote them in place: output-destination.ts) are only checked.
 */
export function copyFinite(values: Float32Array, dst: Float32Array, offset: number): number {
  if (values.buffer === dst.buffer && values.byteOffset === dst.byteOffset + offset * dst.BYTES_PER_ELEMENT)
    return firstNonFinite(values);
  const addon = loadNativeAddon();
  if (addon.loaded) return addon.addon.copyFinite(values, dst, offset);
  dst.set(values, offset);
  return firstNonFiniteJs(values);
}
