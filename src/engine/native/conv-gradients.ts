/**
 * A convolution's gradients from the gradient of its pre-activation output, as tfjs's closures: the fused Conv2D
 * layers' (fused-conv-layers.ts) and the pooled ones' (conv-pool-kernel.ts).
 */
import type { NamedAttrMap } from '@tensorflow/tfjs-core';
import type { Tensor, Tf } from '../tfjs-types.js';
import { CONV_FILTER_BIAS_KERNEL } from './conv-kernels.js';
import { keepForLaterClosure, releaseKept } from '../kept-for-closure.js';

/**
 * The gradients of a convolution (and its bias, `attrs.hasBias`) from `dyPre`, the gradient of its pre-activation
 * output: tfjs's closures for x, filter and bias.
 */
export function convGradients(
  tf: Tf,
  x: Tensor,
  filter: Tensor,
  dyPre: Tensor,
  attrs: NamedAttrMap,
  biasInKernel: () => boolean,
): Record<'x' | 'filter' | 'bias', () => Tensor> {
  const conv = {
    strides: attrs.strides,
    pad: attrs.pad,
    dataFormat: 'NHWC',
    dimRoundingMode: attrs.dimRoundingMode,
  } as NamedAttrMap;
  // the bias gradient of the filter gradient's call, kept (tfjs disposes what a closure made besides its result) for
  // the bias closure, which the walk calls after the filter's; the bias gradient is then a kernel's output (an
  // Identity on its data), not values copied into a new tensor, so that a step's kernels can be replayed
  let biasGradient: Tensor | undefined;
  const filterGradient = () => {
    if (attrs.hasBias !== true || !biasInKernel())
      return tf
        .engine()
        .runKernel('Conv2DBackpropFilter', { x, dy: dyPre }, { ...conv, filterShape: filter.shape }) as Tensor;
    const [dw, db] = tf
      .engine()
      .runKernel(CONV_FILTER_BIAS_KERNEL, { x, dy: dyPre }, { ...conv, filterShape: filter.shape }) as Tensor[];
    biasGradient = tf.keep(db);
    keepForLaterClosure(biasGradient);
    return dw;
  };
  return {
    x: () =>
      tf.engine().runKernel('Conv2DBackpropInput', { dy: dyPre, filter }, { ...conv, inputShape: x.shape }) as Tensor,
    filter: filterGradient,
    bias: () => {
      const kept = biasGradient;
      if (!kept || kept.isDisposed) return tf.sum(dyPre, [0, 1, 2]);
      const dBias = tf.engine().runKernel('Identity', { x: kept }) as Tensor; // the same data, a tensor of this scope
      releaseKept(kept);
      return dBias;
    },
  };
}
