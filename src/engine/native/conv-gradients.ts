/**
 * A convolution's gradients from the gradient of its pre-activation output, as tfjs's closures: the fused Conv2D
 * layers' (fused-conv-layers.ts) and the pooled ones' (conv-pool-kernel.ts).
 */
import type { NamedAttrMap } from '@tensorflow/tfjs-core';
import type { Tensor, Tf } from '../tfjs-types.js';
import { CONV_FILTER_BIAS_KERNEL } from './conv-kernels.js';

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
  // the bias gradient of the filter gradient's call, kept as values (tfjs disposes what a closure made besides
  // its result) for the bias closure, which tfjs calls after the filter's
  let biasValues: Float32Array | undefined;
  const filterGradient = () => {
    if (attrs.hasBias !== true || !biasInKernel())
      return tf
        .engine()
        .runKernel('Conv2DBackpropFilter', { x, dy: dyPre }, { ...conv, filterShape: filter.shape }) as Tensor;
    const [dw, db] = tf
      .engine()
      .runKernel(CONV_FILTER_BIAS_KERNEL, { x, dy: dyPre }, { ...conv, filterShape: filter.shape }) as Tensor[];
    biasValues = (db.dataSync() as Float32Array).slice();
    return dw;
  };
  return {
    x: () =>
      tf.engine().runKernel('Conv2DBackpropInput', { dy: dyPre, filter }, { ...conv, inputShape: x.shape }) as Tensor,
    filter: filterGradient,
    bias: () => (biasValues ? tf.tensor1d(biasValues) : tf.sum(dyPre, [0, 1, 2])),
  };
}
