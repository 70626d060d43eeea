/**
 * MaxPoolGrad as flat loops, the bits of tfjs's cpu kernel: each output's
 * gradient goes to the first maximum of its window (row-major; ties to the
 * first, an all-NaN window to none), and an input that is the maximum of
 * several overlapping windows sums their gradients in double, in output order
 * — the order tfjs's kernel adds them in. tfjs's cpu kernel reads through
 * TensorBuffer.get (~280 ms at 32x32x32x32 here); wasm's own drops or doubles
 * gradients at tied maxima (fast-gradients.ts), so wasm runs this one too.
 * The native engine has its own in C++ (native/src/pool.cc).
 *
 * @example
 * const dx = maxPoolGradient(x, dy, geometry); // Float32Array shaped like x
 */
import type { NamedAttrMap } from '@tensorflow/tfjs-core';
import type { Tf, TensorInfo } from './tfjs-types.js';
import { kernelOutput } from './kernel-output.js';
import { replaceKernel, type AnyKernel } from './replace-kernel.js';

export interface PoolGeometry {
  batch: number;
  inHeight: number;
  inWidth: number;
  channels: number;
  outHeight: number;
  outWidth: number;
  filterHeight: number;
  filterWidth: number;
  strideHeight: number;
  strideWidth: number;
  top: number;
  left: number;
}

/** dx [b, h, w, c] from x [b, h, w, c] and dy [b, oh, ow, c]. */
export function maxPoolGradient(x: ArrayLike<number>, dy: ArrayLike<number>, g: PoolGeometry): Float32Array {
  const C = g.channels,
    dx = new Float64Array(g.batch * g.inHeight * g.inWidth * C);
  for (let b = 0; b < g.batch; ++b) {
    for (let yR = 0; yR < g.outHeight; ++yR) {
      const xRCorner = yR * g.strideHeight - g.top;
      const xRMin = Math.max(0, xRCorner),
        xRMax = Math.min(g.inHeight, g.filterHeight + xRCorner);
      for (let yC = 0; yC < g.outWidth; ++yC) {
        const xCCorner = yC * g.strideWidth - g.left;
        const xCMin = Math.max(0, xCCorner),
          xCMax = Math.min(g.inWidth, g.filterWidth + xCCorner);
        const yPixel = ((b * g.outHeight + yR) * g.outWidth + yC) * C;
        for (let d = 0; d < C; ++d) {
          let max = Number.NEGATIVE_INFINITY,
            at = -1;
          for (let xR = xRMin; xR < xRMax; ++xR) {
            for (let xC = xCMin, i = ((b * g.inHeight + xR) * g.inWidth + xCMin) * C + d; xC < xCMax; ++xC, i += C) {
              if (x[i] > max) {
                max = x[i];
                at = i;
              }
            }
          }
          if (at >= 0) dx[at] += dy[yPixel + d];
        }
      }
    }
  }
  return Float32Array.from(dx);
}

interface KernelArgs {
  inputs: { dy: TensorInfo; input: TensorInfo };
  backend: { readSync(id: unknown): unknown };
  attrs: NamedAttrMap;
}

/** Registers the flat kernel on `backendName`; non-float cases keep the kernel that was there (or `onCpu`). */
export function registerMaxPoolGradientKernel(tf: Tf, backendName: string, onCpu: AnyKernel): void {
  replaceKernel(tf, backendName, 'MaxPoolGrad', onCpu, (args, fallback) => {
    const { inputs, backend, attrs } = args as KernelArgs;
    if (inputs.input.dtype !== 'float32' || inputs.dy.dtype !== 'float32') return fallback(args as never);
    const info = tf.backend_util.computePool2DInfo(
      inputs.input.shape as [number, number, number, number],
      attrs.filterSize as number,
      attrs.strides as number,
      1,
      attrs.pad as 'same',
      attrs.dimRoundingMode as 'floor' | undefined,
    );
    const dx = maxPoolGradient(
      backend.readSync(inputs.input.dataId) as Float32Array,
      backend.readSync(inputs.dy.dataId) as Float32Array,
      {
        batch: info.batchSize,
        inHeight: info.inHeight,
        inWidth: info.inWidth,
        channels: info.inChannels,
        outHeight: info.outHeight,
        outWidth: info.outWidth,
        filterHeight: info.filterHeight,
        filterWidth: info.filterWidth,
        strideHeight: info.strideHeight,
        strideWidth: info.strideWidth,
        top: info.padInfo.top,
        left: info.padInfo.left,
      },
    );
    return kernelOutput(backendName, backend, [...inputs.input.shape], 'float32', dx);
  });
}
