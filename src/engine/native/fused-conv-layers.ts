/**
 * Conv2D layers as one kernel on the native backend. tfjs-layers computes a
 * Conv2D layer with a relu as three kernels in training — conv2d, add (bias),
 * relu — because tfjs-core's `fused.conv2d` fuses only outside a gradient tape.
 * Each of those writes and re-reads a whole activation: with two devices on two
 * cores that memory traffic, not the arithmetic, bounds the step (alexnet-mini:
 * ~17 ms per step unfused vs ~12 fused alone, ~30 vs ~15 two at once).
 *
 * `fuseConvLayers` makes a model's eligible Conv2D layers (tfjs's own call;
 * relu or linear, channels-last, dilation 1, same/valid padding) call one kernel,
 * `TandemFusedConv2D` — convolution + bias + activation in one oneDNN call —
 * whose gradient is registered here: relu's derivative from the output (y > 0
 * exactly where the pre-activation is > 0; NaN stays NaN), the bias gradient
 * as a sum, and the two convolution backprops. Only the layer instance's `call`
 * changes: weights, config and saved models are the model's own.
 *
 * @example
 * const model = await buildModel(tf, spec);
 * if (backend === 'native') fuseConvLayers(tf, model); // ['conv2d_Conv2D1', …]
 */
import type { NamedAttrMap } from '@tensorflow/tfjs-core';
import type { LayersModel, Tensor, Tf } from '../tfjs-types.js';
import { RELU_GRAD_KERNEL } from './elementwise-kernels.js';
import { convGradients } from './conv-gradients.js';
import { onlyPoolAfter, poolInConvCall, stockMaxPoolCall, type LayerLike } from './fused-pool-layers.js';
import { CONV_RELU_POOL_KERNEL, convPoolPlan } from './conv-pool-kernel.js';
import { requireNativeAddon } from './native-addon.js';

export const FUSED_CONV_KERNEL = 'TandemFusedConv2D';

/** The parts of a tfjs-layers Conv2D this module reads (protected in tfjs's typings). */
interface ConvLayer {
  name: string;
  rank: number;
  kernel: { read(): Tensor };
  bias: { read(): Tensor } | null;
  strides: number[];
  padding: string;
  dataFormat: string;
  dilationRate: number[];
  activation: { getClassName(): string } | null;
  call(inputs: Tensor | Tensor[], kwargs: unknown): Tensor | Tensor[];
}

const FUSABLE_ACTIVATIONS = new Set(['relu', 'linear']);

function activationOf(layer: ConvLayer): string {
  return layer.activation?.getClassName() ?? 'linear';
}

/**
 * Whether the one kernel computes what `layer` computes: 2-D, channels-last, dilation 1, same/valid, relu or linear.
 */
function fusable(layer: ConvLayer): boolean {
  return (
    FUSABLE_ACTIVATIONS.has(activationOf(layer)) &&
    layer.rank === 2 &&
    layer.dataFormat === 'channelsLast' &&
    layer.dilationRate.every(d => d === 1) &&
    (layer.padding === 'same' || layer.padding === 'valid')
  );
}

/**
 * Makes every eligible Conv2D layer of `model` (nested models included) run as one `TandemFusedConv2D` kernel, and a
 * MaxPooling2D alone after a relu one as `TandemMaxPoolOfRelu` (fused-pool-layers.ts) inside the convolution's call
 * — in bf16, with windows that tile the convolution's output, both as one `TandemConv2DReluMaxPool`
 * (conv-pool-kernel.ts). Returns the names of the Conv2D layers it changed. Needs the native backend active when the
 * model runs (the kernel is registered there only).
 */
export function fuseConvLayers(tf: Tf, model: LayersModel): string[] {
  const fused: string[] = [];
  // tfjs's own Conv2D.call: a subclass (or instance) with a call of its own computes something else and is left alone.
  const probe = tf.layers.conv2d({ filters: 1, kernelSize: 1 }) as unknown as ConvLayer;
  const stockCall = probe.call,
    stockPool = stockMaxPoolCall(tf);
  const visit = (layer: LayerLike, container: LayerLike) => {
    for (const inner of layer.layers ?? []) visit(inner, layer);
    if (layer.getClassName() !== 'Conv2D') return;
    const conv = layer as unknown as ConvLayer;
    if (conv.call !== stockCall || !fusable(conv)) return;
    const pool = activationOf(conv) === 'relu' ? onlyPoolAfter(layer, container, stockPool) : undefined;
    const pooling = pool && poolInConvCall(tf, pool);
    const attrs = {
      strides: conv.strides,
      pad: conv.padding,
      dataFormat: 'NHWC',
      dilations: [1, 1],
      activation: activationOf(conv),
      reluGradByConsumer: pool !== undefined,
      hasBias: conv.bias !== null,
    } as unknown as NamedAttrMap;
    conv.call = inputs =>
      tf.tidy(() => {
        const x = Array.isArray(inputs) ? inputs[0] : inputs;
        const kernelInputs: Record<string, Tensor> = { x, filter: conv.kernel.read() };
        if (conv.bias) kernelInputs.bias = conv.bias.read();
        if (!pooling) return tf.engine().runKernel(FUSED_CONV_KERNEL, kernelInputs, attrs) as Tensor;
        // bf16: the convolution and its pool as one kernel (conv-pool-kernel.ts); else tfjs's two
        const inBf16 = pooling.tile && requireNativeAddon().getPrecision() === 'bf16';
        const pooledAttrs = { ...attrs, poolSize: pooling.tile } as NamedAttrMap;
        if (inBf16 && convPoolPlan({ tf }, x.shape, kernelInputs.filter.shape, pooledAttrs))
          return tf.engine().runKernel(CONV_RELU_POOL_KERNEL, kernelInputs, pooledAttrs) as Tensor;
        return pooling.pooled(tf.engine().runKernel(FUSED_CONV_KERNEL, kernelInputs, attrs) as Tensor);
      });
    fused.push(conv.name);
  };
  for (const layer of model.layers as unknown as LayerLike[]) visit(layer, model as unknown as LayerLike);
  return fused;
}

/**
 * The gradient of `TandemFusedConv2D` (registered once per thread's tfjs by the native backend). `biasInKernel()`:
 * the bias gradient comes out of the filter gradient's oneDNN call (TandemConv2DBackpropFilterBias, summed in float
 * there) instead of tfjs's Sum (in double, as tfjs): asked each step, true in bf16, where the gradients are bf16's
 * anyway and the sum is one more pass over dy.
 */
export function registerFusedConvGradient(tf: Tf, biasInKernel: () => boolean): void {
  tf.registerGradient({
    kernelName: FUSED_CONV_KERNEL,
    inputsToSave: ['x', 'filter'],
    outputsToSave: [true],
    gradFunc: (dy: Tensor | Tensor[], saved: Tensor[], attrs: NamedAttrMap) => {
      const [x, filter, y] = saved;
      const dyOut = dy as Tensor;
      // reluGradByConsumer: the max pool reading y alone applied relu's derivative in its own gradient
      const dyPre =
        attrs.activation === 'relu' && attrs.reluGradByConsumer !== true
          ? (tf.engine().runKernel(RELU_GRAD_KERNEL, { dy: dyOut, x: y }, { onlyConvolutionsRead: true }) as Tensor)
          : dyOut;
      return convGradients(tf, x, filter, dyPre, attrs, biasInKernel);
    },
  });
}
