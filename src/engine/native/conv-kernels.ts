/**
 * Conv2D, FusedConv2D, Conv2DBackpropInput and Conv2DBackpropFilter on oneDNN,
 * and DepthwiseConv2dNative with its input and filter gradients (a grouped
 * convolution, groups = input channels).
 * Covered: float32, NHWC, dilation 1, any strides and paddings whose output
 * size oneDNN's formula reproduces (tfjs sizes numeric pads in its own way:
 * those shapes fall back). FusedConv2D: bias [OC] and linear/relu/relu6/
 * leakyrelu/sigmoid/elu (prelu falls back).
 */
import type { NamedAttrMap } from '@tensorflow/tfjs-core';
import { pair } from '../kernel-attrs.js';
import {
  activationCode,
  float32Values,
  isLastAxisVector,
  optionalInput,
  output,
  overwrittenOutput,
  sameShape,
  sizeOf,
  type NativeKernel,
  type NativeKernelContext,
} from './native-kernel.js';
import type { NativeConvShape } from './native-addon.js';
import { activationShadow, outputShadow, settle } from './bf16-shadows.js';
import { shadowState, shadowedValues } from './bf16-only-outputs.js';

type Shape4 = [number, number, number, number];
type Conv2DInfo = ReturnType<NativeKernelContext['tf']['backend_util']['computeConv2DInfo']>;

/** Regular (filter [KH, KW, C, OC]) or depthwise (filter [KH, KW, C, M], OC = C·M). */
type ConvKind = 'regular' | 'depthwise';

/** The addon's shape array for this convolution, or undefined when oneDNN cannot reproduce tfjs's geometry. */
export function convShape(
  ctx: NativeKernelContext,
  xShape: number[],
  filterShape: number[],
  attrs: NamedAttrMap,
  kind: ConvKind = 'regular',
): { shape: NativeConvShape; info: Conv2DInfo } | undefined {
  if (xShape.length !== 4 || filterShape.length !== 4) return undefined;
  if (((attrs.dataFormat as string | undefined) ?? 'NHWC') !== 'NHWC') return undefined;
  const [dh, dw] = pair(attrs.dilations, 1);
  if (dh !== 1 || dw !== 1) return undefined;
  if (xShape[3] !== filterShape[2]) return undefined;
  let info: Conv2DInfo;
  try {
    info = ctx.tf.backend_util.computeConv2DInfo(
      xShape as Shape4,
      filterShape as Shape4,
      attrs.strides as number | [number, number],
      1,
      attrs.pad as 'same',
      attrs.dimRoundingMode as 'floor' | undefined,
      kind === 'depthwise',
      'channelsLast',
    );
  } catch {
    return undefined; // the stock kernel reports the user's mistake
  }
  const p = info.padInfo;
  const [n, h, w, c] = xShape;
  const [kh, kw] = filterShape;
  const oc = info.outChannels,
    groups = kind === 'depthwise' ? c : 1;
  const sh = info.strideHeight,
    sw = info.strideWidth;
  if ([p.top, p.left, p.bottom, p.right].some(v => v < 0)) return undefined;
  const oh = Math.floor((h + p.top + p.bottom - kh) / sh) + 1;
  const ow = Math.floor((w + p.left + p.right - kw) / sw) + 1;
  if (oh !== info.outHeight || ow !== info.outWidth || oh < 1 || ow < 1) return undefined;
  return { shape: [n, h, w, c, kh, kw, oc, sh, sw, p.top, p.left, p.bottom, p.right, oh, ow, groups], info };
}

/**
 * The filter gradient and the bias gradient (Σ dy over N, H, W) of a convolution in one oneDNN call: the fused
 * Conv2D layers' gradient in bf16, where the bias gradient is then summed inside the weight-gradient kernel.
 */
export const CONV_FILTER_BIAS_KERNEL = 'TandemConv2DBackpropFilterBias';

export function convKernels(ctx: NativeKernelContext): NativeKernel[] {
  const { addon } = ctx;
  return [
    forward(ctx, 'Conv2D', 'regular'),
    {
      kernelName: 'FusedConv2D',
      run(args) {
        const { inputs, attrs, backend } = args;
        const x = shadowedValues(backend, inputs.x),
          filter = float32Values(backend, inputs.filter);
        const activation = activationCode(attrs.activation);
        const biasInput = optionalInput(args, 'bias');
        if (!x || !filter || activation === undefined || optionalInput(args, 'preluActivationWeights'))
          return undefined;
        const geometry = convShape(ctx, inputs.x.shape, inputs.filter.shape, attrs);
        if (!geometry) return undefined;
        let bias: Float32Array | null = null;
        if (biasInput) {
          const b = float32Values(backend, biasInput);
          if (!b || !isLastAxisVector(biasInput.shape, geometry.shape[6]) || biasInput.shape.length > 4)
            return undefined;
          bias = b;
        }
        const y = overwrittenOutput(sizeOf(geometry.info.outShape));
        const xs = activationShadow(ctx, x);
        const alpha = (attrs.leakyreluAlpha as number | undefined) ?? 0.2;
        // with an activation, y is usually the next convolution's x: its bf16 shadow written in the activation's pass
        const ys = activation === 0 ? undefined : outputShadow(ctx, y);
        const shadows = [xs?.bits, shadowState(xs), ys?.bits ?? null] as const;
        settle(xs, addon.conv2dForward(x, filter, bias, y, geometry.shape, activation, alpha, ...shadows), 1);
        if (ys) ys.filled = true;
        return output(backend, geometry.info.outShape, y);
      },
    },
    backpropInput(ctx, 'Conv2DBackpropInput', 'regular'),
    backpropFilter(ctx, 'Conv2DBackpropFilter', 'regular'),
    backpropFilter(ctx, CONV_FILTER_BIAS_KERNEL, 'regular', true),
    forward(ctx, 'DepthwiseConv2dNative', 'depthwise'),
    backpropInput(ctx, 'DepthwiseConv2dNativeBackpropInput', 'depthwise'),
    backpropFilter(ctx, 'DepthwiseConv2dNativeBackpropFilter', 'depthwise'),
  ];
}

function forward(ctx: NativeKernelContext, kernelName: string, kind: ConvKind): NativeKernel {
  return {
    kernelName,
    run({ inputs, attrs, backend }) {
      const x = shadowedValues(backend, inputs.x),
        filter = float32Values(backend, inputs.filter);
      const geometry = x && filter && convShape(ctx, inputs.x.shape, inputs.filter.shape, attrs, kind);
      if (!x || !filter || !geometry) return undefined;
      const y = overwrittenOutput(sizeOf(geometry.info.outShape));
      const xs = activationShadow(ctx, x);
      settle(xs, ctx.addon.conv2dForward(x, filter, null, y, geometry.shape, 0, 0, xs?.bits, shadowState(xs)), 1);
      return output(backend, geometry.info.outShape, y);
    },
  };
}

function backpropInput(ctx: NativeKernelContext, kernelName: string, kind: ConvKind): NativeKernel {
  return {
    kernelName,
    run({ inputs, attrs, backend }) {
      const dy = shadowedValues(backend, inputs.dy),
        filter = float32Values(backend, inputs.filter);
      const inputShape = attrs.inputShape as number[];
      const geometry = dy && filter && convShape(ctx, inputShape, inputs.filter.shape, attrs, kind);
      if (!dy || !filter || !geometry || !sameShape(geometry.info.outShape, inputs.dy.shape)) return undefined;
      const dx = overwrittenOutput(sizeOf(inputShape));
      const dys = activationShadow(ctx, dy);
      settle(dys, ctx.addon.conv2dBackwardData(dy, filter, dx, geometry.shape, dys?.bits, shadowState(dys)), 1);
      return output(backend, [...inputShape], dx);
    },
  };
}

/** The filter gradient; `withBias`: and the bias gradient, [dw, db], from the same oneDNN call. */
function backpropFilter(ctx: NativeKernelContext, kernelName: string, kind: ConvKind, withBias = false): NativeKernel {
  return {
    kernelName,
    run({ inputs, attrs, backend }) {
      const x = shadowedValues(backend, inputs.x),
        dy = shadowedValues(backend, inputs.dy);
      const filterShape = attrs.filterShape as number[];
      const geometry = x && dy && convShape(ctx, inputs.x.shape, filterShape, attrs, kind);
      if (!x || !dy || !geometry || !sameShape(geometry.info.outShape, inputs.dy.shape)) return undefined;
      const dw = overwrittenOutput(sizeOf(filterShape)),
        oc = geometry.shape[6],
        db = withBias ? overwrittenOutput(oc) : null;
      const xs = activationShadow(ctx, x),
        dys = activationShadow(ctx, dy);
      const shadows = [xs?.bits, shadowState(xs), dys?.bits, shadowState(dys)] as const;
      const filled = ctx.addon.conv2dBackwardWeights(x, dy, dw, db, geometry.shape, ...shadows);
      settle(xs, filled, 1);
      settle(dys, filled, 2);
      const filter = output(backend, [...filterShape], dw);
      return db ? [filter, output(backend, [oc], db)] : filter;
    },
  };
}
