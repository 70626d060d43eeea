/**
 * A max pool after a relu convolution, its gradient in one pass. A fused Conv2D layer with a relu whose output feeds
 * only a MaxPooling2D layer (alexnet's and mnist-node's conv → pool blocks) computes, in backward, the pool's
 * gradient (a whole activation written, mostly zeros) and then relu's derivative over it (read twice, written again).
 * Here the pool layer calls `TandemMaxPoolOfRelu` (MaxPool's kernel under a name of its own, which also records
 * each window's winning cell where the windows tile the input) whose gradient is `TandemMaxPoolReluGrad` — the
 * pool's gradient times relu's derivative at the pool's input, bit for bit what the two kernels give, from the
 * recorded winners without scanning the input again — and the convolution's gradient, told so by its
 * `reluGradByConsumer` attribute, skips its relu step: one pass over the activation instead of three, and no
 * zero-filled output.
 *
 * Only when nothing else reads the convolution's output: one outbound node, the pool's only input, not an output of
 * the model that holds them. Only the two layer instances' `call` changes (weights, config, saved models are the
 * model's own), as in fused-conv-layers.ts.
 */
import type { NamedAttrMap } from '@tensorflow/tfjs-core';
import type { Tensor, Tf } from '../tfjs-types.js';
import { MAX_POOL_OF_RELU_KERNEL, MAX_POOL_RELU_GRAD_KERNEL } from './pool-kernels.js';
import { soleReader, type GraphLayerLike } from '../sole-reader.js';

export { MAX_POOL_OF_RELU_KERNEL } from './pool-kernels.js';

/** The parts of tfjs-layers' Layer this module reads (protected in tfjs's typings). */
export interface LayerLike extends GraphLayerLike<LayerLike> {
  name: string;
  getClassName(): string;
  call(inputs: Tensor | Tensor[], kwargs: unknown): Tensor | Tensor[];
}

interface PoolLayer extends LayerLike {
  poolSize: [number, number];
  strides: [number, number];
  padding: string;
  dataFormat: string;
}

/**
 * The MaxPooling2D layer that alone reads `conv`'s output in `container` (the model whose `layers` hold `conv`), or
 * undefined. `stockPoolCall`: tfjs's own MaxPooling2D call (a subclass computing something else is left alone).
 */
export function onlyPoolAfter(conv: LayerLike, container: LayerLike, stockPoolCall: unknown): PoolLayer | undefined {
  const pool = soleReader(conv, container) as PoolLayer | undefined;
  if (!pool || pool.getClassName() !== 'MaxPooling2D' || pool.call !== stockPoolCall) return undefined;
  return pool.dataFormat === 'channelsLast' ? pool : undefined;
}

/** tfjs's own MaxPooling2D `call`, to tell a stock layer from a subclass. */
export function stockMaxPoolCall(tf: Tf): unknown {
  return (tf.layers.maxPooling2d({ poolSize: 2 }) as unknown as LayerLike).call;
}

/**
 * Moves `pool`'s work (its input is a relu convolution's output, read by it alone) into that convolution's call:
 * `pool` passes its input through; `pooled` pools the convolution's output as `TandemMaxPoolOfRelu`; `tile` is the
 * pool size when the windows are as large as their stride (they tile an output whose sides they divide: the shape
 * TandemConv2DReluMaxPool takes).
 */
export function poolInConvCall(tf: Tf, pool: PoolLayer): { pooled(y: Tensor): Tensor; tile?: [number, number] } {
  const attrs = {
    filterSize: pool.poolSize,
    strides: pool.strides,
    pad: pool.padding,
  } as unknown as NamedAttrMap;
  pool.call = inputs => (Array.isArray(inputs) ? inputs[0] : inputs);
  const [fh, fw] = pool.poolSize;
  const tiles = pool.strides[0] === fh && pool.strides[1] === fw;
  return {
    pooled: y => tf.engine().runKernel(MAX_POOL_OF_RELU_KERNEL, { x: y }, attrs) as Tensor,
    ...(tiles ? { tile: [fh, fw] as [number, number] } : {}),
  };
}

/** The gradient of `TandemMaxPoolOfRelu` (registered once per thread's tfjs by the native backend). */
export function registerPoolOfReluGradient(tf: Tf): void {
  tf.registerGradient({
    kernelName: MAX_POOL_OF_RELU_KERNEL,
    inputsToSave: ['x'],
    outputsToSave: [true],
    gradFunc: (dy: Tensor | Tensor[], saved: Tensor[], attrs: NamedAttrMap) => {
      const [x, y] = saved;
      return {
        x: () =>
          tf.engine().runKernel(MAX_POOL_RELU_GRAD_KERNEL, { dy: dy as Tensor, input: x, output: y }, attrs) as Tensor,
      };
    },
  });
}
