/**
 * What an engine is: a tfjs backend as a device runs it, with the answers
 * the rest of tandem asks of it — can it start here, how it starts on a
 * thread, which arithmetic its comm side runs, how a model is prepared for
 * it, and its capabilities. A new engine (a GPU one) is one file that exports
 * an `Engine` and registers it (`registerEngine`).
 */
import type { FlatArithmetic } from '../optim/flat-arithmetic.js';
import type { LayersModel, Tf } from './tfjs-types.js';
import type { ParamsMirror } from './native/bf16-shadows.js';

export type { ParamsMirror };
import type { Precision } from './engine-options.js';

export interface EngineCapabilities {
  /**
   * `dataSync()` works: the device thread reads synchronously. False (webgpu in Node): it awaits every read, hands each
   * gradient over as its read returns; a method's loss may await reads inside forward (partial-fc), the profiler fences
   * with
   * awaited reads, and sync BatchNormalization on 2+ devices (collectives inside tfjs's synchronous forward and
   * backward) is refused.
   */
  synchronousReads: boolean;
  /** Where a replica's parameters live between steps: host memory (shared buffers) or device memory. */
  parameters: 'host' | 'device';
  /** Conv2D's input gradient as a convolution of dy (tandem's fast gradient) beats the engine's own kernel. */
  convInputGradientAsConvolution: boolean;
}

export interface EngineStartOptions {
  /** OpenMP threads of the native engine on this thread (default 1). */
  nativeThreads?: number;
  /** What convolutions and matmuls multiply in (default fp32; bf16 where `precisionUnavailable` allows it). */
  precision?: Precision;
  /** The values of the options plugins and registered parts declared (a plugin engine's own among them), by key. */
  pluginOptions?: Readonly<Record<string, unknown>>;
}

/**
 * Where an engine's kernels do their work, as seen from the thread that calls
 * them: on that thread itself, on threads of the engine's own (a thread pool:
 * OpenMP, TensorFlow's intra-op pool), or on an accelerator. The profiler
 * picks its clock from this (thread CPU time, process CPU time, wall clock).
 */
export type KernelSite = 'calling-thread' | 'engine-threads' | 'accelerator';

/** The hardware a device thread's engine runs its kernels on, when that is not the thread itself: a GPU adapter. */
export interface EngineDevice {
  /** The device's name as its driver reports it, e.g. `nvidia-h200`, `llvmpipe-llvm-15-0-6-256-bits-`. */
  name: string;
  /** e.g. `nvidia`, `amd`, `intel`, `mesa`. */
  vendor: string;
  /** The driver in words, e.g. `llvmpipe: Mesa 25.0.7 (LLVM 15.0.6)`. */
  driver: string;
  /** A software implementation on the CPU (llvmpipe, SwiftShader): its timings are no GPU measurement. */
  software: boolean;
}

/** An engine device in one line, as the CLI and the benches print it. */
export function describeEngineDevice(d: EngineDevice): string {
  return (
    `${d.name} (vendor ${d.vendor || 'unknown'}, driver ` +
    `${d.driver || 'unknown'})${d.software ? ': software Vulkan (CPU), not a GPU' : ''}`
  );
}

export interface EngineModelOptions {
  /** Native: run Conv2D layers as one fused kernel. */
  nativeFusion: boolean;
}

export interface Engine {
  /** The tfjs backend name it registers and the config's `backend`. */
  readonly name: string;
  readonly description: string;
  readonly capabilities: EngineCapabilities;
  /** Undefined when it can run on this machine; else the error message: why not, and the fix. */
  unavailable(): string | undefined;
  /** Undefined when it multiplies in `precision` here; else why not and the fix. Absent: fp32 only. */
  precisionUnavailable?(precision: Precision): string | undefined;
  /** What multiplies in `precision` here, where it is not fp32 (the run's header says it): the kernels and the CPU. */
  precisionKernels?(precision: Precision): string | undefined;
  /**
   * On a device thread: registers and selects the backend on this thread's tfjs; an accelerator's engine says which
   * device it opened.
   */
  start(tf: Tf, options: EngineStartOptions): Promise<EngineDevice | void>;
  /** The arithmetic of the comm side (all-reduce mean, optimizer updates) with this engine. */
  arithmetic(): FlatArithmetic;
  /**
   * Where its kernels run when started with `options`; absent: 'engine-threads' (the clock that counts every thread).
   */
  kernelSite?(options: EngineStartOptions): KernelSite;
  /** Rewrites a freshly built model for this engine (in place). */
  prepareModel?(tf: Tf, model: LayersModel, options: EngineModelOptions): void;
  /**
   * A training step's passes begin on this thread: `model`'s weights keep their values until the returned function is
   * called (after the last backward). The engine may keep what it derived from them for the step (native bf16: their
   * casts), or read what `mirror` holds. Absent: nothing kept.
   */
  stepScope?: (tf: Tf, model: LayersModel, mirror?: ParamsMirror) => () => void;
}
