/**
 * The gradients of DepthwiseConv2D and SeparableConv2D as flat loops, the same
 * bits as tfjs's cpu kernels (each dot product in the same order, in float64):
 * - DepthwiseConv2dNativeBackpropFilter: tfjs reads every element through
 *   TensorBuffer.get — ~280 ms per call at MobileNet shapes;
 * - DepthwiseConv2dNativeBackpropInput: tfjs walks the image once per channel
 *   (channel loop outside the pixels); here the channel loop is innermost, so
 *   dy and dx are read and written in memory order.
 * Registered for the cpu and wasm engines (wasm has no kernels of its own);
 * native runs oneDNN's grouped convolution instead (native/src/conv.cc).
 */
import type { NamedAttrMap } from '@tensorflow/tfjs-core';
import type { Tf, TensorInfo } from './tfjs-types.js';
import { kernelOutput } from './kernel-output.js';
import { replaceKernel, type AnyKernel } from './replace-kernel.js';

export interface DepthwiseGeometry {
  batch: number;
  inHeight: number;
  inWidth: number;
  inChannels: number;
  outHeight: number;
  outWidth: number;
  outChannels: number;
  filterHeight: number;
  filterWidth: number;
  strideHeight: number;
  strideWidth: number;
  top: number;
  left: number;
}

/** dW [fh, fw, inC, chMul] from x [b, h, w, inC] and dy [b, oh, ow, inC·chMul], in tfjs's loop order. */
export function depthwiseFilterGradient(
  x: ArrayLike<number>,
  dy: ArrayLike<number>,
  g: DepthwiseGeometry,
): Float32Array {
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
            const xRow = (b * g.inHeight + xR) * g.inWidth,
              yRow = (b * g.outHeight + yR) * g.outWidth;
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

/**
 * dx [b, h, w, inC] from dy [b, oh, ow, inC·chMul] and the filter [fh, fw, inC, chMul]; each dot product in tfjs's
 * order.
 */
export function depthwiseInputGradient(
  dy: ArrayLike<number>,
  filter: ArrayLike<number>,
  g: DepthwiseGeometry,
): Float32Array {
  const dx = new Float32Array(g.batch * g.inHeight * g.inWidth * g.inChannels);
  const chMul = g.outChannels / g.inChannels;
  const topPad = g.filterHeight - 1 - g.top,
    leftPad = g.filterWidth - 1 - g.left;
  for (let b = 0; b < g.batch; ++b) {
    for (let xR = 0; xR < g.inHeight; ++xR) {
      const xRCorner = xR - topPad;
      const xRMin = Math.max(0, Math.ceil(xRCorner / g.strideHeight));
      const yRMax = Math.min(g.outHeight, (g.filterHeight + xRCorner) / g.strideHeight);
      for (let xC = 0; xC < g.inWidth; ++xC) {
        const xCCorner = xC - leftPad;
        const xCMin = Math.max(0, Math.ceil(xCCorner / g.strideWidth));
        const yCMax = Math.min(g.outWidth, (g.filterWidth + xCCorner) / g.strideWidth);
        const dxPixel = ((b * g.inHeight + xR) * g.inWidth + xC) * g.inChannels;
        for (let d1 = 0; d1 < g.inChannels; ++d1) {
          let dotProd = 0;
          for (let yR = xRMin; yR < yRMax; ++yR) {
            const wR = yR * g.strideHeight - xRCorner;
            for (let yC = xCMin; yC < yCMax; ++yC) {
              const wC = yC * g.strideWidth - xCCorner;
              const dyOffset = ((b * g.outHeight + yR) * g.outWidth + yC) * g.outChannels + d1 * chMul;
              const fltOffset =
                (((g.filterHeight - 1 - wR) * g.filterWidth + (g.filterWidth - 1 - wC)) * g.inChannels + d1) * chMul;
              for (let dm = 0; dm < chMul; ++dm) dotProd += dy[dyOffset + dm] * filter[fltOffset + dm];
            }
          }
          dx[dxPixel + d1] = dotProd;
        }
      }
    }
  }
  return dx;
}

type Shape4 = [number, number, number, number];
interface KernelArgs {
  inputs: Record<string, TensorInfo>;
  backend: { readSync(id: unknown): unknown };
  attrs: NamedAttrMap;
}

/** Both gradient kernels: which inputs they read, the geometry's shapes, and the loops. */
const DEPTHWISE_GRADIENTS = {
  DepthwiseConv2dNativeBackpropFilter: {
    inputs: ['x', 'dy'],
    shapes: (a: KernelArgs) => [a.inputs.x.shape, a.attrs.filterShape] as [Shape4, Shape4],
    outShape: (info: DepthwiseInfo) => info.filterShape,
    compute: (first: Float32Array, second: Float32Array, g: DepthwiseGeometry) =>
      depthwiseFilterGradient(first, second, g),
  },
  DepthwiseConv2dNativeBackpropInput: {
    inputs: ['dy', 'filter'],
    shapes: (a: KernelArgs) => [a.attrs.inputShape, a.inputs.filter.shape] as [Shape4, Shape4],
    outShape: (info: DepthwiseInfo) => info.inShape,
    compute: (first: Float32Array, second: Float32Array, g: DepthwiseGeometry) =>
      depthwiseInputGradient(first, second, g),
  },
} as const;
type DepthwiseGradientName = keyof typeof DEPTHWISE_GRADIENTS;
type DepthwiseInfo = ReturnType<Tf['backend_util']['computeConv2DInfo']>;

export const DEPTHWISE_GRADIENT_KERNELS = Object.keys(DEPTHWISE_GRADIENTS) as DepthwiseGradientName[];

/**
 * Registers the flat kernel `name` on `backendName`; dilated or non-float cases keep the kernel that was there (or the
 * cpu's).
 */
export function registerDepthwiseGradientKernel(
  tf: Tf,
  backendName: string,
  name: DepthwiseGradientName,
  onCpu: AnyKernel,
): void {
  const spec = DEPTHWISE_GRADIENTS[name];
  replaceKernel(tf, backendName, name, onCpu, (args, fallback) => {
    const a = args as KernelArgs;
    const [first, second] = spec.inputs.map(k => a.inputs[k]);
    const dilations = a.attrs.dilations as number | number[] | undefined;
    const dilated = Array.isArray(dilations)
      ? dilations.some(d => d !== 1)
      : dilations !== undefined && dilations !== 1;
    if (dilated || first.dtype !== 'float32' || second.dtype !== 'float32' || a.attrs.dimRoundingMode != null)
      return fallback(args as never);
    const [inShape, filterShape] = spec.shapes(a);
    const info = tf.backend_util.computeConv2DInfo(
      inShape,
      filterShape,
      a.attrs.strides as number,
      1,
      a.attrs.pad as 'same',
      undefined,
      true,
    );
    const out = spec.compute(
      a.backend.readSync(first.dataId) as Float32Array,
      a.backend.readSync(second.dataId) as Float32Array,
      {
        batch: info.batchSize,
        inHeight: info.inHeight,
        inWidth: info.inWidth,
        inChannels: info.inChannels,
        outHeight: info.outHeight,
        outWidth: info.outWidth,
        outChannels: info.outChannels,
        filterHeight: info.filterHeight,
        filterWidth: info.filterWidth,
        strideHeight: info.strideHeight,
        strideWidth: info.strideWidth,
        top: info.padInfo.top,
        left: info.padInfo.left,
      },
    );
    return kernelOutput(backendName, a.backend, spec.outShape(info), 'float32', out);
  });
}
