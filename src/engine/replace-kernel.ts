/**
 * Puts one of tandem's kernels in place of a backend's: the kernel that was
 * registered (or, where the backend has none, `onCpu`: the cpu backend's on a
 * copy of the data) stays reachable as the fallback for cases tandem's does
 * not cover (another dtype, dilation, …).
 *
 * @example
 * replaceKernel(tf, 'wasm', 'MaxPoolGrad', onCpu, (args, fallback) => covered(args) ? mine(args) : fallback(args));
 */
import type { Tf, TensorInfo } from './tfjs-types.js';

/** A kernel function as tandem calls it (the arguments are whatever tfjs passes). */
export type AnyKernel = (args: never) => TensorInfo;

export function replaceKernel(
  tf: Tf,
  backendName: string,
  kernelName: string,
  onCpu: AnyKernel,
  run: (args: unknown, fallback: AnyKernel) => TensorInfo,
): void {
  const stock = tf.getKernel(kernelName, backendName);
  const fallback: AnyKernel = stock ? (stock.kernelFunc as unknown as AnyKernel) : onCpu;
  if (stock) tf.unregisterKernel(kernelName, backendName);
  tf.registerKernel({ kernelName, backendName, kernelFunc: ((args: unknown) => run(args, fallback)) as never });
}
