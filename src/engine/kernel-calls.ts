/**
 * The pieces tandem's replacement kernels are made of (fast-gradients.ts and its kernels): a backend's stock kernel
 * by name, one output of a kernel, which convolutions the convolution-based formulas cover, a kernel replaced with
 * the stock one as its fallback, and a kernel run by the cpu backend on a copy of its inputs.
 */
import { pair } from './kernel-attrs.js';
import { replaceKernel, type AnyKernel } from './replace-kernel.js';
import type { Tf, TensorInfo, KernelBackend } from './tfjs-types.js';

export type KernelArgs = { inputs: Record<string, TensorInfo>; backend: KernelBackend; attrs: Record<string, unknown> };
export type KernelFunc = (args: KernelArgs) => TensorInfo | TensorInfo[];

export function kernel(tf: Tf, name: string, backendName: string): KernelFunc {
  const k = tf.getKernel(name, backendName);
  if (!k) throw new Error(`tandem fast gradients: kernel '${name}' is missing on backend '${backendName}'`);
  return k.kernelFunc as unknown as KernelFunc;
}

export function one(out: TensorInfo | TensorInfo[]): TensorInfo {
  return Array.isArray(out) ? out[0] : out;
}

/**
 * A numeric pad is only well defined in tfjs for a square filter and equal
 * strides: tfjs sizes the output width from the filter height and the height
 * stride. Only the stock kernels agree with that, so they keep such cases.
 */
export function numericPadIsUniform(attrs: Record<string, unknown>, filterShape: number[]): boolean {
  if (typeof attrs.pad !== 'number') return true;
  const [sh, sw] = pair(attrs.strides, 1);
  return filterShape[0] === filterShape[1] && sh === sw;
}

/** Is this a conv the convolution-based formulas cover? NHWC, no dilation, no rounding mode, a well-defined pad. */
export function convIsCovered(attrs: Record<string, unknown>, filterShape: number[]): boolean {
  const format = (attrs.dataFormat as string | undefined) ?? 'NHWC';
  const [dh, dw] = pair(attrs.dilations, 1);
  return (
    format === 'NHWC' &&
    dh === 1 &&
    dw === 1 &&
    attrs.dimRoundingMode == null &&
    numericPadIsUniform(attrs, filterShape)
  );
}

/**
 * `kernelName` on `backendName` replaced by `run`, whose fallback is the stock kernel (or the cpu backend's on a copy).
 */
export function replaceWith(
  tf: Tf,
  backendName: string,
  kernelName: string,
  run: (args: KernelArgs, fallback: KernelFunc) => TensorInfo | TensorInfo[],
): void {
  replaceKernel(
    tf,
    backendName,
    kernelName,
    (args => delegateToCpu(tf, kernelName, args as KernelArgs)) as AnyKernel,
    (args, fallback) => run(args as KernelArgs, fallback as unknown as KernelFunc) as TensorInfo,
  );
}

/** `kernelName` on `backendName`, computed by the cpu backend's kernel on a copy of the inputs. */
export function registerOnCpu(tf: Tf, backendName: string, kernelName: string): void {
  tf.registerKernel({
    kernelName,
    backendName,
    kernelFunc: ((args: Parameters<KernelFunc>[0]) => delegateToCpu(tf, kernelName, args)) as never,
  });
}

export function delegateToCpu(tf: Tf, kernelName: string, args: Parameters<KernelFunc>[0]): TensorInfo {
  const cpuKernel = tf.getKernel(kernelName, 'cpu');
  const cpu = tf.findBackend('cpu');
  if (!cpuKernel || !cpu)
    throw new Error(`tandem: kernel '${kernelName}' has no cpu fallback; register the cpu backend`);
  const { inputs, backend, attrs } = args;
  const ids: object[] = [];
  const cpuInputs: Record<string, TensorInfo> = {};
  for (const [name, t] of Object.entries(inputs)) {
    if (t == null) continue; // optional inputs (a fused kernel's bias)
    const dataId = cpu.write(backend.readSync(t.dataId) as Float32Array, t.shape, t.dtype);
    ids.push(dataId);
    cpuInputs[name] = { dataId, shape: t.shape, dtype: t.dtype };
  }
  const out = one((cpuKernel.kernelFunc as unknown as KernelFunc)({ inputs: cpuInputs, backend: cpu, attrs }));
  const values = cpu.readSync(out.dataId) as Float32Array;
  for (const id of ids) cpu.disposeData(id);
  cpu.disposeData(out.dataId);
  const b = backend as unknown as {
    makeOutput(shape: number[], dtype: string, v?: unknown, values?: Float32Array): TensorInfo;
  };
  return b.makeOutput(out.shape, out.dtype, null, values);
}
