/**
 * Outputs written in bf16 alone (precision bf16): a gradient that only convolutions read — the pool's gradient inside a
 * pooled convolution's gradient (conv-pool-kernel.ts), relu's inside a fused convolution's (fused-conv-layers.ts) — is
 * written into its bf16 shadow and nowhere else. The convolutions read the shadow (as they read any filled one); the
 * float32 array stays unwritten ("stale") until something reads the tensor's values through the backend (a stock
 * kernel, `dataSync()`, a kernel that takes no shadow), which widens the shadow into it first: the values rounded to
 * bf16, which is what the convolutions multiplied. alexnet-mini's three pool gradients wrote 6.6 MB of float32 a step
 * that nothing read.
 *
 * The stale state lives in two places: the backend's data entry, whose `values` is an accessor that widens once, and
 * the shadow (`stale`), which the addon reads (native/src/bf16-cast.cc): a primitive that reads float32 after all
 * widens the shadow into the array itself.
 */
import type { MathBackendCPU } from '@tensorflow/tfjs-backend-cpu';
import type { TensorInfo } from '@tensorflow/tfjs-core';
import type { NativeKernelContext } from './native-kernel.js';
import { OUTPUT_POOL, type Bf16Shadow } from './output-pool.js';

/** The array behind a backend data entry whose `values` widens on first read. */
const RAW = Symbol('tandem.rawValues');

interface DataEntry {
  values?: unknown;
  [RAW]?: Float32Array;
}

function entryOf(backend: MathBackendCPU, t: TensorInfo): DataEntry | undefined {
  return backend.data.get(t.dataId) as DataEntry | undefined;
}

/**
 * A float32 tensor's array as it is, for a kernel that hands its shadow to the addon with `shadowState` (the addon
 * widens a stale one where it reads float32): no widening here. Undefined for another dtype or array.
 */
export function shadowedValues(backend: MathBackendCPU, t: TensorInfo | undefined): Float32Array | undefined {
  if (!t || t.dtype !== 'float32') return undefined;
  const values = storedValues(entryOf(backend, t));
  return values instanceof Float32Array ? values : undefined;
}

/** The array a backend data entry holds, without widening a stale one (for the backend's own bookkeeping). */
export function storedValues(entry: object | undefined): unknown {
  return entry === undefined ? undefined : ((entry as DataEntry)[RAW] ?? (entry as DataEntry).values);
}

/** The shadow's state as the addon reads it: 0 empty, 1 filled, 2 filled with the float32 array stale. */
export function shadowState(s: Bf16Shadow | undefined): number {
  return !s?.filled ? 0 : s.stale ? 2 : 1;
}

/**
 * A float32 output of `shape` written in bf16 alone by `write` (into the shadow's bits), under precision bf16;
 * undefined otherwise (or when the pool cannot give the array a shadow): the caller writes float32 as usual.
 */
export function bf16OnlyOutput(
  ctx: NativeKernelContext,
  backend: MathBackendCPU,
  shape: number[],
  values: Float32Array,
  write: (bits: Uint16Array) => void,
): TensorInfo | undefined {
  if (ctx.addon.getPrecision() !== 'bf16') return undefined;
  const shadow = OUTPUT_POOL.shadowToWrite(values);
  if (!shadow) return undefined;
  write(shadow.bits);
  const info = backend.makeTensorInfo(shape, 'float32', values); // the pool owns values (and keeps the shadow)
  shadow.filled = true;
  shadow.stale = true;
  const entry = entryOf(backend, info)!;
  // the entry back to a plain data property holding v
  const plain = (v: unknown) => {
    delete entry[RAW];
    Object.defineProperty(entry, 'values', { value: v, writable: true, configurable: true, enumerable: true });
  };
  entry[RAW] = values;
  Object.defineProperty(entry, 'values', {
    configurable: true,
    enumerable: true,
    get() {
      if (shadow.stale) ctx.addon.widenBf16(shadow.bits, values);
      shadow.stale = false;
      plain(values);
      return values;
    },
    set: plain,
  });
  return info;
}
