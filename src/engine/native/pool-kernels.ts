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

function maxPoolGrad(ctx: NativeKernelContext, kernelName: string, reluOfX: boolean): NativeKernel {
  return {
    kernelName,
    run({ inputs, attrs, backend }) {
      const dy = float32Values(backend, inputs.dy),
        x = float32Values(backend, inputs.input);
      const geometry = dy && x && poolShape(ctx, inputs.input.shape, attrs);
      if (!dy || !x || !geometry || sizeOf(geometry.outShape) !== sizeOf(inputs.dy.shape)) return undefined;
      const dx = overwrittenOutput(sizeOf(inputs.input.shape));
      ctx.addon.maxPoolGrad(dy, x, dx, geometry.shape, reluOfX);
      return output(backend, [...inputs.input.shape], dx);
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
        if (!x || !geometry) return undefined;
        const y = overwrittenOutput(sizeOf(geometry.outShape));
        addon.maxPool(x, y, geometry.shape);
        return output(backend, geometry.outShape, y);
      },
    },
    maxPoolGrad(ctx, 'MaxPoolGrad', false),
    maxPoolGrad(ctx, MAX_POOL_RELU_GRAD_KERNEL, true),
  ];
}
