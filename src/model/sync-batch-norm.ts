/**
 * BatchNormalization layers in training. Synchronised (PyTorch's
 * SyncBatchNorm, Horovod's SyncBatchNormalization, tandem's default): every
 * layer normalises with the statistics of the *global* batch, so N devices
 * compute what one engine computes on the global batch; moving statistics are
 * updated from those, so they stay identical on every device. The formulas
 * and the all-reduces are in batch-norm-training.ts; they run inside tfjs's
 * synchronous forward and backward, on the compute communicator's blocking
 * operations, in layer order (forward) and reverse layer order (backward):
 * the same order on every device. Local mode and one device use the same
 * kernel without the collective.
 *
 * @example
 * trainBatchNormalization(tf, model, collective.blocking); // before training; inference is unchanged
 */
import type { BlockingCollective } from '../collectives/collective.js';
import type { LayersModel, Tensor, Tf } from '../engine/tfjs-types.js';
import { soleReader, type GraphLayerLike } from '../engine/sole-reader.js';
import { batchNormTraining } from './batch-norm-training.js';
import { allLayers } from './all-layers.js';
import { ownFloats } from '../engine/host-floats.js';
import { backendRecordable, registerTraceHook, runTraceHook } from '../engine/kernel-trace.js';
import { BN_TRAIN_KERNEL, registerBatchNormKernels, registerCollective } from './batch-norm-kernels.js';
import type { TensorInfo } from '@tensorflow/tfjs-core';
import type { MathBackendCPU } from '@tensorflow/tfjs-backend-cpu';

interface LayerVariableLike {
  read(): Tensor;
  write(t: Tensor): void;
}

/** A layer as its model's graph holds it. */
interface GraphLayer extends GraphLayerLike<GraphLayer> {
  name: string;
  getClassName(): string;
  activation?: { getClassName(): string };
  call(inputs: Tensor | Tensor[], kwargs: Record<string, unknown>): Tensor | Tensor[];
}

interface BatchNormLayer extends Omit<GraphLayer, 'layers'> {
  layers?: BatchNormLayer[];
  axis: number;
  momentum: number;
  epsilon: number;
  center: boolean;
  scale: boolean;
  gamma?: LayerVariableLike;
  beta?: LayerVariableLike;
  movingMean: LayerVariableLike;
  movingVariance: LayerVariableLike;
}

/**
 * Every BatchNormalization layer of `model` (nested models and wrappers' layers included: TimeDistributed), in layer
 * order.
 */
export function batchNormalizationLayers(model: LayersModel): BatchNormLayer[] {
  return allLayers(model.layers as unknown as BatchNormLayer[]).filter(
    layer => layer.getClassName() === 'BatchNormalization',
  );
}

/**
 * Makes every BatchNormalization layer of `model` train on tandem's kernel
 * (batch-norm-training.ts): with `collective`, on the statistics of the global
 * batch (sync); without, on this device's batch (local, or one device), as
 * tfjs does but without its broadcasting kernels. Returns the layers' names.
 */
export function trainBatchNormalization(tf: Tf, model: LayersModel, collective?: BlockingCollective): string[] {
  const reluAfter = reluLayersAfterBatchNorm(tf, model);
  return batchNormalizationLayers(model).map(layer => {
    const stock = layer.call.bind(layer);
    const relu = reluAfter.get(layer);
    if (relu) {
      // in training the relu is the BatchNormalization's (below): the relu layer passes its input through
      const stockRelu = relu.call.bind(relu);
      relu.call = (inputs, kwargs) => (kwargs?.training === true ? inputs : stockRelu(inputs, kwargs));
    }
    const kernel = asKernel(tf, layer, collective);
    layer.call = (inputs, kwargs) => {
      if (kwargs?.training !== true) return stock(inputs, kwargs);
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      return tf.tidy(() => trainingForward(tf, layer, x, collective, relu !== undefined, kernel));
    };
    return layer.name;
  });
}

/**
 * Each BatchNormalization layer whose output only a relu Activation layer reads (resnet's conv → BN → relu), with
 * that layer: one outbound node, the Activation's only input, in the same model, not one of its outputs; a stock
 * Activation (a subclass is left alone). Nested models are searched; wrappers' inner layers have no graph of their own.
 */
function reluLayersAfterBatchNorm(tf: Tf, model: LayersModel): Map<GraphLayer, GraphLayer> {
  const stockActivationCall = (tf.layers.activation({ activation: 'relu' }) as unknown as GraphLayer).call;
  const found = new Map<GraphLayer, GraphLayer>();
  const visit = (container: GraphLayer) => {
    for (const layer of container.layers ?? []) {
      visit(layer);
      if (layer.getClassName() !== 'BatchNormalization') continue;
      const next = soleReader(layer, container);
      if (
        next?.getClassName() === 'Activation' &&
        next.activation?.getClassName() === 'relu' &&
        next.call === stockActivationCall
      )
        found.set(layer, next);
    }
  };
  visit(model as unknown as GraphLayer);
  return found;
}

/** The layer as batch-norm-kernels.ts's kernels where the backend's steps replay; undefined: customGrad's closures. */
interface AsKernel {
  collective: number;
  /** The moving averages' update from the kernel's mean and variance, a hook a replayed step runs again. */
  hook: number;
}

function asKernel(tf: Tf, layer: BatchNormLayer, collective: BlockingCollective | undefined): AsKernel | undefined {
  if (!backendRecordable(tf)) return undefined;
  registerBatchNormKernels(tf);
  const values = (t: TensorInfo) => (tf.backend() as unknown as MathBackendCPU).data.get(t.dataId)!.values;
  const hook = registerTraceHook(
    ([mean, variance]) => {
      for (const [moving, stat] of [
        [layer.movingMean, mean],
        [layer.movingVariance, variance],
      ] as const) {
        const v = values(stat) as Float32Array;
        if (!movingAverageOf(tf, moving, v, layer.momentum))
          throw new Error(`moving average of ${layer.name}: the variable holds no array of ${v.length} values`);
      }
    },
    [layer.movingMean.read(), layer.movingVariance.read()],
  );
  return { collective: registerCollective(collective), hook };
}

function trainingForward(
  tf: Tf,
  layer: BatchNormLayer,
  x: Tensor,
  collective: BlockingCollective | undefined,
  relu: boolean,
  kernel: AsKernel | undefined,
): Tensor {
  const C = x.shape[layer.axis >= 0 ? layer.axis : layer.axis + x.rank];
  const gamma = layer.scale && layer.gamma ? layer.gamma.read() : tf.ones([C]);
  const beta = layer.center && layer.beta ? layer.beta.read() : tf.zeros([C]);
  if (kernel) {
    const attrs = { axis: layer.axis, epsilon: layer.epsilon, relu, collective: kernel.collective };
    const [y, mean, variance] = tf.engine().runKernel(BN_TRAIN_KERNEL, { x, gamma, beta }, attrs) as Tensor[];
    runTraceHook(kernel.hook, [mean, variance]);
    return y;
  }
  const { y, mean, variance } = batchNormTraining(tf, x, gamma, beta, {
    axis: layer.axis,
    epsilon: layer.epsilon,
    collective,
    relu,
  });
  movingAverage(tf, layer.movingMean, mean, layer.momentum);
  movingAverage(tf, layer.movingVariance, variance, layer.momentum);
  return y;
}

/**
 * As tfjs-layers updates a moving statistic: moving − (moving − value)·(1 − momentum), each step rounded to float32.
 * On the native backend in a loop over the arrays (one tensor made, where tfjs's three ops a statistic were 36
 * kernel calls a step in resnet-mini); the same bits.
 */
function movingAverage(tf: Tf, variable: LayerVariableLike, value: Tensor, momentum: number): void {
  const v = ownFloats(tf, value);
  if (v && movingAverageOf(tf, variable, v, momentum)) return;
  tf.tidy(() => {
    const orig = variable.read();
    variable.write(tf.sub(orig, tf.mul(tf.sub(orig, value), 1 - momentum)));
  });
}

function movingAverageOf(tf: Tf, variable: LayerVariableLike, v: Float32Array, momentum: number): boolean {
  let written = false;
  tf.tidy(() => {
    const orig = variable.read();
    const o = ownFloats(tf, orig);
    if (!o || o.length !== v.length) return;
    const decay = Math.fround(1 - momentum),
      next = new Float32Array(o.length);
    for (let i = 0; i < o.length; i++) next[i] = o[i] - Math.fround(Math.fround(o[i] - v[i]) * decay);
    variable.write(tf.tensor(next, orig.shape, 'float32'));
    written = true;
  });
  return written;
}
