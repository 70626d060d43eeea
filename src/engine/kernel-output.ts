/**
 * A kernel's output tensor holding `values`, on the backend that runs it: wasm writes through its makeOutput, the
 * cpu-based backends through makeTensorInfo.
 */
import type { TensorInfo } from './tfjs-types.js';

export function kernelOutput(
  backendName: string,
  backend: unknown,
  shape: number[],
  dtype: 'float32' | 'int32',
  values: Float32Array | Int32Array,
): TensorInfo {
  const b = backend as {
    makeOutput(s: number[], d: string, m: null, v: unknown): TensorInfo;
    makeTensorInfo(s: number[], d: string, v: unknown): TensorInfo;
  };
  return backendName === 'wasm' ? b.makeOutput(shape, dtype, null, values) : b.makeTensorInfo(shape, dtype, values);
}
