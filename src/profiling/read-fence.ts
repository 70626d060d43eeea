/**
 * The profiler's fence: returns once tensors' values are computed, so that a
 * clock reading after it includes their work. A synchronous read where the
 * engine has one (cpu, wasm, native: nothing is awaited, the interval holds
 * the kernels and the read alone); an awaited read where it has none (webgpu:
 * the device's queue drains and the values come back to the host, so an
 * interval also holds one read-back).
 *
 * @example
 * const fence = readFence(getEngine(backend).capabilities.synchronousReads);
 * const pending = fence([output]);
 * if (pending) await pending; // undefined on a synchronous engine: no await in the timed interval
 */
import type { Tensor } from '../engine/tfjs-types.js';

export type ReadFence = (tensors: readonly Tensor[]) => Promise<void> | undefined;

export function readFence(synchronousReads: boolean): ReadFence {
  if (synchronousReads) {
    return tensors => {
      for (const t of tensors) t.dataSync();
      return undefined;
    };
  }
  return tensors => Promise.all(tensors.map(t => t.data())).then(() => undefined);
}
