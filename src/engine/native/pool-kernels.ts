/**
 * MaxPool and MaxPoolGrad in C++ with the tfjs cpu backend's semantics
 * (first maximum of the window wins; padding never does). Covered: float32,
 * NHWC 4-D inputs, any filter, stride and padding tfjs accepts.
 * `TandemMaxPoolReluGrad` is MaxPoolGrad followed by relu's gradient at the pool's input (TandemReluGrad), in one
 * pass: the gradient of a max pool whose input is a relu's output (fused-pool-layers.ts).
 */
import {
  float32Values,
  output,
  overwrittenOutput,
  sizeOf,
  type NativeKernel,
  type NativeKernelArgs,
  type NativeKernelContext,
} from './native-kernel.js';
import type { NativePoolShape } from './native-addon.js';

type Shape4 = [number, number, number, number];

function poolShape(
  ctx: NativeKernelContext,
  xShape: number[],
  attrs: NativeKernelArgs['attrs'],
): { shape: NativePoolShape; outShape: number[] } | undefined {
  if (xShape.length !== 4) return undefined;
  try {
    const info = ctx.tf.backend_util.computePool2DInfo(
      xShape as Shape4,
      attrs.filterSize as [number, number],
      attrs.strides as [number, number],
      1,
      attrs.pad as 'same',
      attrs.dimRoundingMode as 'floor' | undefined,
    );
    const p = info.padInfo;
    if (p.top < 0 || p.left < 0 || info.outHeight < 1 || info.outWidth < 1) return undefined;
    const [n, h, w, c] = xShape;
    return {
      shape: [
        n,
        h,
        w,
        c,
        info.filterHeight,
        info.filterWidth,
        info.strideHeight,
        info.strideWidth,
        p.top,
        p.left,
        info.outHeight,
        info.outWidth,
      ],
      outShape: info.outShape,
    };
  } catch {
    return undefined; // the stock kernel reports the user's mistake
  }
}

export const MAX_POOL_RELU_GRAD_KERNEL = 'TandemMaxPoolReluGrad';
/** MaxPool of a relu's output (fused-pool-layers.ts): MaxPool's forward, recording each window's winner. */
export const MAX_POOL_OF_RELU_KERNEL = 'TandemMaxPoolOfRelu';

/**
 * The winners TandemMaxPoolOfRelu recorded, by its output's data (a dataId is never reused; the gradient's saved
 * output shares it): the cell of each window and channel that won, so that the gradient need not scan x again.
 */
const WINNERS = new WeakMap<object, Int8Array>();

/** A 1×1 window at stride 1: tfjs's MaxPool returns x itself (a NaN stays), so the stock kernel runs. */
function isIdentity(shape: NativePoolShape): boolean {
  const [, h, w, , fh, fw, , , , , oh, ow] = shape;
  return fh === 1 && fw === 1 && oh === h && ow === w;
}

/** The winners recorded for `output` (TandemMaxPoolOfRelu's, or TandemConv2DReluMaxPool's), if any. */
export function winnersOf(output: { dataId: object }): Int8Array | undefined {
  return WINNERS.get(output.dataId);
}

/** Records `winners` for `output` (its gradient reads them). */
export function recordWinners(output: { dataId: object }, winners: Int8Array): void {
  WINNERS.set(output.dataId, winners);
}

/** Whether TandemMaxPoolOfRelu recorded winners for this output (its gradient then reads them, not x). */
export function recordedWinners(output: { dataId: object }): boolean {
  return WINNERS.has(output.dataId);
}

/** Windows that tile x (no padding, overlap or gap): the geometry the winners are recorded for. */
function tiles(shape: NativePoolShape): boolean {
  const [, h, w, , fh, fw, sh, sw, pt, pl, oh, ow] = shape;
  return fh === sh && fw === sw && pt === 0 && pl === 0 && oh * sh === h && ow * sw === w && fh * fw <= 120;
}

function maxPoolGrad(ctx: NativeKernelContext, kernelName: string, reluOfX: boolean): NativeKernel {
  return {
    kernelName,
    run({ inputs, attrs, backend }) {
      const dy = float32Values(backend, inputs.dy),
        x = float32Values(backend, inputs.input);
      const geometry = dy && x && poolShape(ctx, inputs.input.shape, attrs);
      if (!dy || !x || !geometry || sizeOf(geometry.outShape) !== sizeOf(inputs.dy.shape)) return undefined;
      const dx = overwrittenOutput(sizeOf(inputs.input.shape));
      const winners = reluOfX && inputs.output ? WINNERS.get(inputs.output.dataId) : undefined,
        y = winners && float32Values(backend, inputs.output);
      if (winners && y && tiles(geometry.shape) && winners.length === y.length)
        ctx.addon.maxPoolReluGradWinners(dy, x, y, winners, dx, geometry.shape);
      else ctx.addon.maxPoolGrad(dy, x, dx, geometry.shape, reluOfX);
      return output(backend, [...inputs.input.shape], dx);
    },
  };
}

function maxPoolOfRelu(ctx: NativeKernelContext): NativeKernel {
  return {
    kernelName: MAX_POOL_OF_RELU_KERNEL,
    run({ inputs, attrs, backend }) {
      const x = float32Values(backend, inputs.x);
      const geometry = x && poolShape(ctx, inputs.x.shape, attrs);
      if (!x || !geometry || isIdentity(geometry.shape)) return undefined;
      const y = overwrittenOutput(sizeOf(geometry.outShape));
      if (!tiles(geometry.shape)) {
        ctx.addon.maxPool(x, y, geometry.shape);
        return output(backend, geometry.outShape, y);
      }
      const winners = new Int8Array(y.length);
      ctx.addon.maxPoolWinners(x, y, winners, geometry.shape);
      const info = output(backend, geometry.outShape, y);
      WINNERS.set(info.dataId, winners);
      return info;
    },
  };
}

export function poolKernels(ctx: NativeKernelContext): NativeKernel[] {
  const { addon } = ctx;
  return [
    {
      kernelName: 'MaxPool',
      run({ inputs, attrs, backend }) {
        const x = float32Values(backend, inputs.x);
        const geometry = x && poolShape(ctx, inputs.x.shape, attrs);
        if (!x || !geometry || isIdentity(geometry.shape)) return undefined;
        const y = overwrittenOutput(sizeOf(geometry.outShape));
        addon.maxPool(x, y, geometry.shape);
        return output(backend, geometry.outShape, y);
      },
    },
    maxPoolGrad(ctx, 'MaxPoolGrad', false),
    maxPoolGrad(ctx, MAX_POOL_RELU_GRAD_KERNEL, true),
    maxPoolOfRelu(ctx),
  ];
}
