/**
 * A relu convolution and the max pool that alone reads it, as one kernel under precision bf16:
 * `TandemConv2DReluMaxPool` computes relu(conv(x) + bias) in bf16 into a buffer of the addon's own — the activation
 * is never written in float32, nor read back as float32 by the pool — and pools it by windows that tile it (2×2 at
 * stride 2 in alexnet's and mnist-node's blocks). Its output is the pooled activation, with its bf16 shadow filled
 * (the next convolution reads it without a conversion) and each window's winner recorded. Its gradient is the
 * pool's from the winners (`TandemMaxPoolReluGradOfPooled`: relu's derivative from the pooled values, no pass over
 * the convolution's output, which is not kept) and then the convolution's (fused-conv-layers.ts's).
 *
 * What it changes in bf16: the pool sees the convolution's output rounded to bf16 — the values the next convolution
 * multiplied anyway (rounding is monotonic: the maximum of the rounded values is the rounded maximum) — so two cells
 * that round to one value tie, and the first wins, where float32 told them apart. The relu is applied by the pool
 * (max then relu, the same value): oneDNN's relu post-op would turn a NaN into 0. A window holding a NaN gets a NaN
 * gradient in every cell (the convolution's output is not kept to tell which). fp32 runs take tfjs's two kernels.
 */
import type { NamedAttrMap } from '@tensorflow/tfjs-core';
import type { Tensor, Tf } from '../tfjs-types.js';
import { convShape } from './conv-kernels.js';
import type { NativeConvShape, NativePoolShape } from './native-addon.js';
import {
  float32Values,
  optionalInput,
  output,
  overwrittenOutput,
  sizeOf,
  type NativeKernel,
  type NativeKernelContext,
} from './native-kernel.js';
import { OUTPUT_POOL } from './output-pool.js';
import { bf16OnlyOutput, shadowState, shadowedValues } from './bf16-only-outputs.js';
import { recordWinners, winnersOf } from './pool-kernels.js';
import { convGradients } from './conv-gradients.js';

export const CONV_RELU_POOL_KERNEL = 'TandemConv2DReluMaxPool';
export const POOLED_RELU_GRAD_KERNEL = 'TandemMaxPoolReluGradOfPooled';

/** The addon's shapes of a relu convolution pooled by `poolSize` windows that tile its output, or undefined. */
export function convPoolPlan(
  ctx: Pick<NativeKernelContext, 'tf'>,
  xShape: number[],
  filterShape: number[],
  attrs: NamedAttrMap,
): { conv: NativeConvShape; pooled: number[] } | undefined {
  const geometry = convShape(ctx as NativeKernelContext, xShape, filterShape, attrs);
  const [fh, fw] = attrs.poolSize as [number, number];
  if (!geometry || fh * fw > 120) return undefined;
  const [n, oh, ow, oc] = geometry.info.outShape;
  if (oh % fh !== 0 || ow % fw !== 0) return undefined;
  return { conv: geometry.shape, pooled: [n, oh / fh, ow / fw, oc] };
}

/** The pool's shape for maxPoolReluGradWinners: the convolution's output [N, H, W, C] in tiles of `poolSize`. */
function tiledPoolShape(pooled: readonly number[], poolSize: [number, number]): NativePoolShape {
  const [n, ph, pw, c] = pooled;
  const [fh, fw] = poolSize;
  return [n, ph * fh, pw * fw, c, fh, fw, fh, fw, 0, 0, ph, pw];
}

export function convPoolKernels(ctx: NativeKernelContext): NativeKernel[] {
  const { addon } = ctx;
  return [
    {
      kernelName: CONV_RELU_POOL_KERNEL,
      run(args) {
        const { inputs, attrs, backend } = args;
        const x = shadowedValues(backend, inputs.x),
          filter = float32Values(backend, inputs.filter),
          biasInput = optionalInput(args, 'bias');
        const bias = biasInput ? float32Values(backend, biasInput) : null;
        const plan =
          x &&
          filter &&
          addon.getPrecision() === 'bf16' &&
          convPoolPlan(ctx, inputs.x.shape, inputs.filter.shape, attrs);
        if (!x || !filter || bias === undefined || !plan) return undefined;
        const y = overwrittenOutput(sizeOf(plan.pooled));
        const info = output(backend, plan.pooled, y);
        const ys = OUTPUT_POOL.shadowOf(y);
        const xs = OUTPUT_POOL.shadowOf(x);
        const winners = new Int8Array(y.length);
        const poolSize = attrs.poolSize as [number, number];
        const yBits = ys?.bits ?? new Uint16Array(y.length);
        const filled = addon.conv2dReluMaxPool(
          x,
          filter,
          bias,
          y,
          yBits,
          winners,
          plan.conv,
          poolSize,
          xs?.bits,
          shadowState(xs),
        );
        if (xs) xs.filled = filled === 1;
        if (ys) ys.filled = true;
        recordWinners(info, winners);
        return info;
      },
    },
    pooledReluGradKernel(ctx),
  ];
}

/** The pool's gradient through relu inside `TandemConv2DReluMaxPool`'s gradient, from the winners it recorded. */
function pooledReluGradKernel(ctx: NativeKernelContext): NativeKernel {
  const { addon } = ctx;
  return {
    kernelName: POOLED_RELU_GRAD_KERNEL,
    run({ inputs, attrs, backend }) {
      const dy = float32Values(backend, inputs.dy),
        y = float32Values(backend, inputs.output);
      const winners = winnersOf(inputs.output);
      if (!dy || !y || !winners || winners.length !== y.length) return undefined;
      const shape = tiledPoolShape(inputs.output.shape, attrs.poolSize as [number, number]);
      const dx = overwrittenOutput(y.length * shape[4] * shape[5]);
      // only the convolution's gradients read it, in bf16: written in bf16 alone
      const bf16 = bf16OnlyOutput(ctx, backend, shape.slice(0, 4), dx, bits =>
        addon.maxPoolReluGradWinners(dy, null, y, winners, null, shape, bits),
      );
      if (bf16) return bf16;
      const info = output(backend, shape.slice(0, 4), dx);
      addon.maxPoolReluGradWinners(dy, null, y, winners, dx, shape);
      return info;
    },
  };
}

/** The gradient of `TandemConv2DReluMaxPool` (registered once per thread's tfjs by the native backend). */
export function registerConvPoolGradient(tf: Tf, biasInKernel: () => boolean): void {
  tf.registerGradient({
    kernelName: CONV_RELU_POOL_KERNEL,
    inputsToSave: ['x', 'filter'],
    outputsToSave: [true],
    gradFunc: (dy: Tensor | Tensor[], saved: Tensor[], attrs: NamedAttrMap) => {
      const [x, filter, y] = saved;
      const kernel = tf.engine().runKernel(POOLED_RELU_GRAD_KERNEL, { dy: dy as Tensor, output: y }, attrs);
      return convGradients(tf, x, filter, kernel as Tensor, attrs, biasInKernel);
    },
  });
}
