/**
 * Dropout's multiplier as a kernel where the backend has one (the native backend: native/dropout-mask-kernel.ts), so
 * that a step's mask is a kernel's output rather than values made outside kernels: a recorded step
 * (kernel-trace.ts) replays it, drawing the step's own mask. The kernel's seed is not an attribute but a source, a
 * function the caller registered once (`registerSeedSource`) that gives the seed of the step being run: a layer's key
 * of (run seed, device, step, layer). The values are dropoutMask's (dropout-mask.ts): the bits of the other engines'.
 */
import type { NamedAttrMap } from '@tensorflow/tfjs-core';
import type { Tensor, Tf } from './tfjs-types.js';

export const DROPOUT_MASK_KERNEL = 'TandemDropoutMask';

const SOURCES: (() => number)[] = [];

/** A seed source's id for the kernel's attributes: `seed()` is asked each time the kernel runs. */
export function registerSeedSource(seed: () => number): number {
  return SOURCES.push(seed) - 1;
}

/** The seed source `id` gives now. */
export function seedOf(id: number): number {
  const source = SOURCES[id];
  if (!source) throw new Error(`dropout mask: no seed source ${id}`);
  return source();
}

/** The mask's integer parameters for `rate`: the kept value (1/keep) and u's threshold (see dropoutMultiplier). */
export function dropoutThreshold(rate: number): { kept: number; lo: number } {
  const keep = Math.fround(1 - rate);
  // the least 24-bit u with fround(u / 2^24 + keep) >= 1 (2^24: none)
  let lo = 0,
    hi = 1 << 24;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (Math.fround(mid / 16777216 + keep) >= 1) hi = mid;
    else lo = mid + 1;
  }
  return { kept: Math.fround(1 / keep), lo };
}

/** The Weyl sequence's start for a seed. */
export function maskBase(seed: number): number {
  return Math.imul(seed | 0, 0x85ebca6b) ^ 0x2545f491;
}

/** The multiplier of `shape` for `rate` from the kernel, seeded by `source`; undefined where the backend has none. */
export function dropoutMaskKernel(tf: Tf, shape: number[], rate: number, source: number): Tensor | undefined {
  if (!tf.getKernel(DROPOUT_MASK_KERNEL, tf.getBackend())) return undefined;
  const attrs: NamedAttrMap = { shape, rate, source };
  return tf.engine().runKernel(DROPOUT_MASK_KERNEL, {}, attrs) as Tensor;
}
