/**
 * Dropout's multiplier values (src/model/seeded-random-layers.ts's dropoutMultiplier), twice: in JS, the reference,
 * and in the native addon (native/src/flat-ops.cc, the same integer steps and bits, ~8× faster), which runs wherever it
 * loaded, whatever the engine: it only fills a Float32Array. test/dropout-mask.test.ts compares them.
 *
 * Value i: z = base + i·0x9e3779b9 (32-bit), murmur3's finaliser, u = z's high 24 bits; table[1] (kept) where
 * u >= lo, else table[0] (dropped).
 */
import { loadNativeAddon } from './native/native-addon.js';
import { OUTPUT_POOL } from './native/output-pool.js';

/** `size` values of the mask: the addon's loop where it loaded (into an array the native backend recycles). */
export function dropoutMask(size: number, base: number, lo: number, table: Float32Array): Float32Array {
  const native = loadNativeAddon();
  if (!native.loaded) return dropoutMaskJs(size, base, lo, table);
  const values = OUTPUT_POOL.take(size, false);
  native.addon.dropoutMask(values, base, lo, table[1]);
  return values;
}

/** dropoutMask in JS: the reference. */
export function dropoutMaskJs(size: number, base: number, lo: number, table: Float32Array): Float32Array {
  const values = new Float32Array(size);
  for (let i = 0; i < values.length; i++) {
    let z = (base + Math.imul(i, 0x9e3779b9)) | 0;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    values[i] = table[1 - ((((z ^ (z >>> 16)) >>> 8) - lo) >>> 31)];
  }
  return values;
}
