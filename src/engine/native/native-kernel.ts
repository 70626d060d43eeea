/**
 * What a native kernel is: a function that either computes the kernel's output
 * with the addon, or returns `undefined` when it does not cover the case
 * (dtype, layout, padding, dilation...), in which case the stock tfjs cpu kernel
 * runs instead. Never a wrong answer: an unsupported case is a fallback.
 */
import type { MathBackendCPU } from '@tensorflow/tfjs-backend-cpu';
import type { NamedAttrMap, TensorInfo } from '@tensorflow/tfjs-core';
import type { Tf } from '../tfjs-types.js';
import { NATIVE_ACTIVATIONS, type NativeAddon } from './native-addon.js';
import { OUTPUT_POOL } from './output-pool.js';

export interface NativeKernelArgs {
  /** The kernel's inputs; optional ones (bias, preluActivationWeights) are read through `optionalInput`. */
  inputs: Record<string, TensorInfo>;
  attrs: NamedAttrMap;
  backend: MathBackendCPU;
}

export interface NativeKernel {
  kernelName: string;
  /** The output (several for a kernel of several outputs), or undefined when the stock kernel must run. */
  run(args: NativeKernelArgs): TensorInfo | TensorInfo[] | undefined;
}

/** What every kernel family gets: the addon and the thread's tfjs (for shape helpers). */
export interface NativeKernelContext {
  addon: NativeAddon;
  tf: Tf;
}

/** The Float32Array behind a float32 tensor on the cpu backend, or undefined (other dtype, complex, strings). */
export function float32Values(backend: MathBackendCPU, t: TensorInfo | undefined): Float32Array | undefined {
  if (!t || t.dtype !== 'float32') return undefined;
  const values = backend.data.get(t.dataId)?.values;
  return values instanceof Float32Array ? values : undefined;
}

/**
 * A float32 tensor's values as a Float32Array, also when tfjs holds them in another typed array: the cpu backend's
 * cast of a bool tensor to float32 keeps the bool's Uint8Array (0/1), which is read here as the same numbers.
 */
export function float32Numbers(backend: MathBackendCPU, t: TensorInfo | undefined): Float32Array | undefined {
  if (!t || t.dtype !== 'float32') return undefined;
  const values = backend.data.get(t.dataId)?.values;
  if (values instanceof Float32Array) return values;
  return values instanceof Uint8Array || values instanceof Int32Array ? Float32Array.from(values) : undefined;
}

/** A zeroed array of `length` floats for a kernel's output (recycled from the thread's output pool when it can be). */
export function outputArray(length: number): Float32Array {
  return OUTPUT_POOL.take(length);
}

/** An array of `length` floats for an output the kernel writes whole (convolutions, matmuls): not zeroed first. */
export function overwrittenOutput(length: number): Float32Array {
  return OUTPUT_POOL.take(length, false);
}

/** A new float32 tensor of `shape` on the backend, holding `values`. */
export function output(backend: MathBackendCPU, shape: number[], values: Float32Array): TensorInfo {
  return backend.makeTensorInfo(shape, 'float32', values);
}

export function sizeOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** The addon's activation code for a tfjs fused activation, or undefined (prelu, unknown: stock kernel). */
export function activationCode(activation: unknown): number | undefined {
  const name = (activation ?? 'linear') as string;
  return Object.hasOwn(NATIVE_ACTIVATIONS, name)
    ? NATIVE_ACTIVATIONS[name as keyof typeof NATIVE_ACTIVATIONS]
    : undefined;
}

/** A vector of `n` floats broadcast along the last axis: shape [n] or [1, ..., 1, n]. */
export function isLastAxisVector(shape: readonly number[], n: number): boolean {
  return shape.length >= 1 && shape[shape.length - 1] === n && shape.slice(0, -1).every(d => d === 1);
}

/** An optional kernel input (absent when the op was called without it). */
export function optionalInput(args: NativeKernelArgs, name: string): TensorInfo | undefined {
  return (args.inputs as Partial<Record<string, TensorInfo>>)[name];
}
