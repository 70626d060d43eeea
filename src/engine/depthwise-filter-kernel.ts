/**
 * DepthwiseConv2dNativeBackpropFilter (the weight gradient of DepthwiseConv2D
 * and SeparableConv2D) as flat loops: tfjs's cpu kernel walks the same loops
 * in the same order with the same float64 dot products, but reads every
 * element through TensorBuffer.get — ~280 ms per call at MobileNet shapes. The
 * same bits, without the indexing overhead. Registered for the cpu and wasm
 * engines (wasm has no kernel of its own); native runs oneDNN's grouped
 * convolution instead (native/src/conv.cc).
 */
import type { NamedAttrMap } from '@tensorflow/tfjs-core';
import type { Tf, TensorInfo } from './tfjs-types.js';
import { kernelOutput } from './kernel-output.js';

export interface DepthwiseGeometry {
  batch: number; inHeight: number; inWidth: number; inChannels: number;
  outHeight: number; outWidth: number; outChannels: number;
  filterHeight: number; filterWidth: number; strideHeight: number; strideWidth: number; top: number; left: number;
}

/** dW [fh, fw, inC, chMul] from x [b, h, w, inC] and dy [b, oh, ow, inC·chMul], in tfjs's loop order. */
export function depthwiseFilterGradient(x: ArrayLike<number>, dy: ArrayLike<number>, g: DepthwiseGeometry): Float32Array {
  const dW = new Float32Array(g.filterHeight * g.filterWidth * g.outChannels);
  const chMul = g.outChannels / g.inChannels;
  for (let wR = 0; wR < g.filterHeight; ++wR) {
    const yRMin = Math.max(0, Math.ceil((g.top - wR) / g.strideHeight));
    const yRMax = Math.min(g.outHeight, (g.inHeight + g.top - wR) / g.strideHeight);
    for (let wC = 0; wC < g.filterWidth; ++wC) {
      const yCMin = Math.max(0, Math.ceil((g.left - wC) / g.strideWidth));
      const yCMax = Math.min(g.outWidth, (g.inWidth + g.left - wC) / g.strideWidth);
      for (let d2 = 0; d2 < g.outChannels; ++d2) {
        const d1 = Math.trunc(d2 / chMul);
        let dotProd = 0;
        for (let b = 0; b < g.batch; ++b) {
          for (let yR = yRMin; yR < yRMax; ++yR) {
            const xR = wR + yR * g.strideHeight - g.top;
            const xRow = (b * g.inHeight + xR) * g.inWidth, yRow = (b * g.outHeight + yR) * g.outWidth;
            for (let yC = yCMin; yC < yCMax; ++yC) {
              const xC = wC + yC * g.strideWidth - g.left;
              dotProd += x[(xRow + xC) * g.inChannels + d1] * dy[(yRow + yC) * g.outChannels + d2];
            }
          }
        }
        dW[(wR * g.filterWidth + wC) * g.outChannels + d2] = dotProd;
      }
    }
  }
  return dW;
}

/** Registers the flat kernel on `backendName`; dilated or non-float cases keep the kernel that was there (or the cpu's). */
/** A kernel function as tandem calls it (the arguments are whatever tfjs passes). */
type AnyKernel = (args: never) => TensorInfo;

export function registerDepthwiseFilterKernel(tf: Tf, backendName: string, onCpu: AnyKernel): void {
  const name = 'DepthwiseConv2dNativeBackpropFilter';
  const stock = tf.getKernel(name, backendName);
  const fallback: AnyKernel = stock ? (stock.kernelFunc as unknown as AnyKernel) : onCpu;
  if (stock) tf.unregisterKernel(name, backendName);
  tf.registerKernel({
    kernelName: name,
    backendName,
    kernelFunc: ((args: unknown) => {
      const { inputs, backend, attrs } = args as { inputs: { x: TensorInfo; dy: TensorInfo }; backend: { readSync(id: unknown): unknown }; attrs: NamedAttrMap };
      const dilations = attrs.dilations as number | number[] | undefined;
      const dilated = Array.isArray(dilations) ? dilations.some(d => d !== 1) : dilations !== undefined && dilations !== 1;
      if (dilated || inputs.x.dtype !== 'float32' || attrs.dimRoundingMode != null) return fallback(args as never);
      const info = tf.backend_util.computeConv2DInfo(inputs.x.shape as [number, number, number, number], attrs.filterShape as [number, number, number, number],
        attrs.strides as number, 1, attrs.pad as 'same', undefined, true);
      const dW = depthwiseFilterGradient(backend.readSync(inputs.x.dataId) as Float32Array, backend.readSync(inputs.dy.dataId) as Float32Array, {
        batch: info.batchSize, inHeight: info.inHeight, inWidth: info.inWidth, inChannels: info.inChannels,
        outHeight: info.outHeight, outWidth: info.outWidth, outChannels: info.outChannels,
        filterHeight: info.filterHeight, filterWidth: info.filterWidth, strideHeight: info.strideHeight, strideWidth: info.strideWidth,
        top: info.padInfo.top, left: info.padInfo.left,
      });
      return kernelOutput(backendName, backend, info.filterShape, 'float32', dW);
    }) as never,
  });
}
