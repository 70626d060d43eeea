/**
 * The `native` backend: the tfjs cpu backend (same data, same kernels) with
 * oneDNN/C++ kernels registered over the ones that dominate training. Every
 * native kernel falls back to the stock cpu kernel for a case it does not
 * cover. Registered per thread (each worker has its own tfjs and its own
 * oneDNN primitives); OpenMP threads per worker are set here (default 1).
 *
 * @example
 * registerNativeBackend(tf, { threads: 1 });
 * await tf.setBackend('native');
 */
import { MathBackendCPU } from '#tfjs-backend-cpu';
import type { KernelFunc, NamedAttrMap, TensorInfo } from '@tensorflow/tfjs-core';
import { TandemError } from '../../errors.js';
import type { Tf, Tensor } from '../tfjs-types.js';
import { requireNativeAddon, type NativeAddon } from './native-addon.js';
import { NATIVE_BACKEND } from './backend-name.js';
import type { NativeKernel, NativeKernelArgs } from './native-kernel.js';
import { CONV_FILTER_BIAS_KERNEL, convKernels } from './conv-kernels.js';
import { matmulKernels } from './matmul-kernels.js';
import { tileKernel } from './tile-kernel.js';
import { registerSoftmaxCrossEntropyGradient, softmaxCrossEntropyKernels } from './softmax-cross-entropy-kernel.js';
import { SOFTMAX_CE_GRAD_KERNEL, SOFTMAX_CE_KERNEL } from '../softmax-cross-entropy.js';
import { DROPOUT_MASK_KERNEL } from '../dropout-kernel.js';
import { dropoutMaskKernel } from './dropout-mask-kernel.js';
import { MAX_POOL_OF_RELU_KERNEL, MAX_POOL_RELU_GRAD_KERNEL, poolKernels } from './pool-kernels.js';
import { elementwiseKernels, RELU_GRAD_KERNEL } from './elementwise-kernels.js';
import { FUSED_CONV_KERNEL, registerFusedConvGradient } from './fused-conv-layers.js';
import { registerPoolOfReluGradient } from './fused-pool-layers.js';
import { storedValues } from './bf16-only-outputs.js';
import { OUTPUT_POOL } from './output-pool.js';
import { noteRead, wrapBackendKernels } from '../kernel-trace.js';
import {
  CONV_RELU_POOL_KERNEL,
  convPoolKernels,
  POOLED_RELU_GRAD_KERNEL,
  registerConvPoolGradient,
} from './conv-pool-kernel.js';

export interface NativeBackendOptions {
  /** OpenMP threads for this thread's oneDNN calls (default 1: one core per device). */
  threads?: number;
  /** What this thread's convolutions and matmuls multiply in (default fp32). */
  precision?: 'fp32' | 'bf16';
}

/**
 * How often each native kernel ran natively and how often it fell back to the stock kernel, on this thread, and the
 * milliseconds spent in it (native runs and fallbacks together: a bench's split of a step into kernels and the rest).
 */
export type NativeKernelCounts = Record<string, { native: number; fallback: number; ms: number }>;

const counts: NativeKernelCounts = {};
const registeredOn = new WeakSet<object>();

export function nativeKernelCounts(): NativeKernelCounts {
  return structuredClone(counts);
}

function allKernels(tf: Tf, addon: NativeAddon): NativeKernel[] {
  const ctx = { tf, addon };
  return [
    ...convKernels(ctx),
    ...matmulKernels(ctx),
    ...poolKernels(ctx),
    ...elementwiseKernels(ctx),
    ...convPoolKernels(ctx),
    tileKernel(),
    ...softmaxCrossEntropyKernels(),
    dropoutMaskKernel(ctx),
  ];
}

type DataId = Parameters<MathBackendCPU['disposeData']>[0];

/**
 * A cpu backend that does not greet the user with tfjs's "install tfjs-node" notice, and hands the native kernels'
 * output arrays back to the thread's output pool (output-pool.ts) when it drops their data.
 */
class NativeCpuBackend extends MathBackendCPU {
  constructor() {
    super();
    (this as unknown as { firstUse: boolean }).firstUse = false;
  }

  override write(
    values: Parameters<MathBackendCPU['write']>[0],
    shape: number[],
    dtype: Parameters<MathBackendCPU['write']>[2],
  ): DataId {
    OUTPUT_POOL.stored(values);
    return super.write(values, shape, dtype);
  }

  override move(
    dataId: DataId,
    values: Parameters<MathBackendCPU['move']>[1],
    shape: number[],
    dtype: Parameters<MathBackendCPU['move']>[3],
    refCount: number,
  ): void {
    OUTPUT_POOL.stored(values);
    super.move(dataId, values, shape, dtype, refCount);
  }

  /** What `dataSync()` hands out may outlive the tensor: never recycled. */
  override readSync(dataId: DataId): ReturnType<MathBackendCPU['readSync']> {
    noteRead(dataId);
    OUTPUT_POOL.pin(this.data.get(dataId)?.values);
    return super.readSync(dataId);
  }

  override disposeData(dataId: DataId, force = false): boolean {
    const values = storedValues(this.data.get(dataId)); // a bf16-only output's array is not widened for this
    const released = super.disposeData(dataId, force);
    if (values !== undefined && !this.data.has(dataId)) OUTPUT_POOL.dropped(values);
    return released;
  }
}

/**
 * Registers the `native` backend on this thread's tfjs (idempotent) and sets
 * the addon's thread count. Throws BACKEND_UNAVAILABLE when the addon is not built.
 */
export function registerNativeBackend(tf: Tf, options: NativeBackendOptions = {}): NativeAddon {
  const addon = requireNativeAddon();
  const threads = options.threads ?? 1;
  if (!Number.isInteger(threads) || threads < 1)
    throw new TandemError('BAD_CONFIG', `native threads must be a positive integer, got ${threads}`);
  addon.setNumThreads(threads);
  addon.setPrecision(options.precision ?? 'fp32');
  // Every kernel output is a fresh Float32Array: let glibc reuse freed blocks
  // (up to 64 MiB) instead of mapping fresh pages that fault on first touch.
  addon.retainFreedMemory(64 * 2 ** 20, 512 * 2 ** 20);
  OUTPUT_POOL.alignWith(buffer => addon.misalignment(buffer)); // outputs on 64-byte boundaries: 2× faster oneDNN
  const engine = tf.engine() as object;
  if (registeredOn.has(engine)) return addon;
  registeredOn.add(engine);

  tf.registerBackend(NATIVE_BACKEND, () => new NativeCpuBackend(), 0);
  const natives = new Map(allKernels(tf, addon).map(k => [k.kernelName, k]));
  for (const stock of tf.getKernelsForBackend('cpu')) {
    const native = natives.get(stock.kernelName);
    tf.registerKernel({
      ...stock,
      backendName: NATIVE_BACKEND,
      kernelFunc: native ? withFallback(native, stock.kernelFunc) : stock.kernelFunc,
    });
  }
  const reluGrad = natives.get(RELU_GRAD_KERNEL);
  if (reluGrad)
    tf.registerKernel({
      kernelName: RELU_GRAD_KERNEL,
      backendName: NATIVE_BACKEND,
      kernelFunc: withFallback(reluGrad, undefined),
    });
  registerReluGradient(tf);
  // A fused Conv2D layer's kernel (fused-conv-layers.ts): FusedConv2D's, under its own name so that it can have a
  // gradient.
  const fusedConv = natives.get('FusedConv2D'),
    stockFusedConv = tf.getKernel('FusedConv2D', 'cpu');
  if (fusedConv && stockFusedConv) {
    tf.registerKernel({
      kernelName: FUSED_CONV_KERNEL,
      backendName: NATIVE_BACKEND,
      kernelFunc: withFallback({ kernelName: FUSED_CONV_KERNEL, run: fusedConv.run }, stockFusedConv.kernelFunc),
    });
    registerFusedConvGradient(tf, () => addon.getPrecision() === 'bf16');
  }
  registerFilterBias(tf, natives);
  registerPoolOfRelu(tf, natives);
  // Kernels of tandem's own with no stock kernel behind them, native only, as their callers ask for them only where
  // they run: a relu convolution and its max pool in one (bf16, conv-pool-kernel.ts), as the layer does; a
  // classifier's loss from logits in one, tfjs's bits (softmax-cross-entropy-kernel.ts), as ../softmax-cross-entropy.ts
  // does; dropout's multiplier (dropout-mask-kernel.ts), as ../../model/seeded-random-layers.ts does
  const own = [CONV_RELU_POOL_KERNEL, POOLED_RELU_GRAD_KERNEL, SOFTMAX_CE_KERNEL, SOFTMAX_CE_GRAD_KERNEL];
  for (const name of [...own, DROPOUT_MASK_KERNEL])
    tf.registerKernel({
      kernelName: name,
      backendName: NATIVE_BACKEND,
      kernelFunc: withFallback(natives.get(name)!, undefined),
    });
  registerConvPoolGradient(tf, () => addon.getPrecision() === 'bf16');
  registerSoftmaxCrossEntropyGradient(tf);
  wrapBackendKernels(tf, NATIVE_BACKEND); // recordable for a step's replay (../kernel-trace.ts)
  return addon;
}

/** The filter and bias gradients in one call; elsewhere tfjs's Conv2DBackpropFilter and Sum. */
function registerFilterBias(tf: Tf, natives: Map<string, NativeKernel>): void {
  const native = natives.get(CONV_FILTER_BIAS_KERNEL),
    filter = tf.getKernel('Conv2DBackpropFilter', 'cpu'),
    sum = tf.getKernel('Sum', 'cpu');
  if (!native || !filter || !sum) return;
  const stock: KernelFunc = args => [
    filter.kernelFunc(args) as TensorInfo,
    sum.kernelFunc({
      ...args,
      inputs: { x: args.inputs.dy },
      attrs: { axis: [0, 1, 2], keepDims: false },
    }) as TensorInfo,
  ];
  tf.registerKernel({
    kernelName: CONV_FILTER_BIAS_KERNEL,
    backendName: NATIVE_BACKEND,
    kernelFunc: withFallback(native, stock),
  });
}

/** A relu convolution's max pool (fused-pool-layers.ts): MaxPool under its own name, and its one-pass gradient. */
function registerPoolOfRelu(tf: Tf, natives: Map<string, NativeKernel>): void {
  const pool = natives.get(MAX_POOL_OF_RELU_KERNEL),
    grad = natives.get(MAX_POOL_RELU_GRAD_KERNEL),
    stockPool = tf.getKernel('MaxPool', 'cpu');
  if (!pool || !grad || !stockPool) return;
  tf.registerKernel({
    kernelName: MAX_POOL_OF_RELU_KERNEL,
    backendName: NATIVE_BACKEND,
    kernelFunc: withFallback(pool, stockPool.kernelFunc),
  });
  tf.registerKernel({
    kernelName: MAX_POOL_RELU_GRAD_KERNEL,
    backendName: NATIVE_BACKEND,
    kernelFunc: withFallback(grad, undefined),
  });
  registerPoolOfReluGradient(tf);
}

function withFallback(native: NativeKernel, stock: KernelFunc | undefined): KernelFunc {
  const count = (counts[native.kernelName] ??= { native: 0, fallback: 0, ms: 0 });
  return (args => {
    const start = performance.now();
    const out = native.run(args as unknown as NativeKernelArgs);
    if (out) {
      count.native++;
      count.ms += performance.now() - start;
      return out;
    }
    count.fallback++;
    if (!stock)
      throw new TandemError(
        'BACKEND_UNAVAILABLE',
        `native kernel ${native.kernelName} cannot run these inputs and has no stock kernel`,
      );
    const result = stock(args);
    count.ms += performance.now() - start;
    return result;
  }) as KernelFunc;
}

/** Relu's gradient as one native kernel on the native backend; tfjs's own (step, cast, multiply) elsewhere. */
function registerReluGradient(tf: Tf): void {
  const stock = tf.getGradient('Relu');
  if (!stock) throw new Error('tandem native backend: tfjs has no Relu gradient registered');
  tf.registerGradient({
    kernelName: 'Relu',
    inputsToSave: ['x'],
    gradFunc: (dy: Tensor | Tensor[], saved: Tensor[], attrs: NamedAttrMap) => {
      if (tf.getBackend() !== NATIVE_BACKEND || saved[0].dtype !== 'float32') return stock.gradFunc(dy, saved, attrs);
      return { x: () => tf.engine().runKernel(RELU_GRAD_KERNEL, { dy: dy as Tensor, x: saved[0] }) as Tensor };
    },
  });
}
