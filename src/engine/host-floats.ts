/**
 * A float32 tensor's values on the host for a loop that reads them at once and keeps nothing (BatchNormalization's
 * training loops). On the native backend this is the tensor's own array, read in place: `dataSync()` would hand it out
 * for good, so the output pool (native/output-pool.ts) could never recycle it, and every such activation would be a
 * fresh allocation each step for the GC to collect. Elsewhere it is `dataSync()`.
 *
 * The caller must not keep the array past the tensor's life (a gradient reads a tensor saved for it, not an array
 * read in forward).
 */
import type { MathBackendCPU } from '@tensorflow/tfjs-backend-cpu';
import type { Tensor, Tf } from './tfjs-types.js';
import { NATIVE_BACKEND } from './native/backend-name.js';

export function hostFloats(tf: Tf, t: Tensor): Float32Array {
  return ownFloats(tf, t) ?? (t.dataSync() as Float32Array);
}

/** The tensor's own array on the native backend (read in place, nothing copied), or undefined elsewhere. */
export function ownFloats(tf: Tf, t: Tensor): Float32Array | undefined {
  if (t.dtype !== 'float32' || tf.getBackend() !== NATIVE_BACKEND) return undefined;
  const values = (tf.engine().backend as MathBackendCPU).data.get(t.dataId)?.values;
  return values instanceof Float32Array ? values : undefined;
}
