/**
 * Synchronised BatchNormalization (PyTorch's SyncBatchNorm, Horovod's
 * SyncBatchNormalization, tandem's default): in training, every
 * BatchNormalization layer normalises with the statistics of the *global*
 * batch, so N devices compute what one engine computes on the global batch.
 *
 * Forward: all-reduce (sum) the per-channel sums and the sample count → the
 * global mean; all-reduce the sums of squared deviations → the global (biased)
 * variance, as tf.moments computes it; moving statistics updated from those,
 * so they stay identical on every device. Backward: all-reduce Σdy and Σdy·x̂
 * over the global batch; dx = γ/σ · (dy − Σdy/N − x̂·Σdy·x̂/N), which is the
 * gradient of the sum of every device's loss; γ and β get this device's own
 * sums, which the gradient pipeline averages like every other gradient.
 *
 * The collectives run inside tfjs's synchronous forward and backward, on the
 * compute communicator's blocking operations, in layer order (forward) and
 * reverse layer order (backward): the same order on every device.
 *
 * @example
 * syncBatchNormalization(tf, model, collective.blocking!); // before training; inference is unchanged
 */
import type { BlockingCollective } from '../collectives/collective.js';
import type { LayersModel, Tensor, Tf } from '../engine/tfjs-types.js';

interface LayerVariableLike { read(): Tensor; write(t: Tensor): void }

interface BatchNormLayer {
  name: string;
  axis: number;
  momentum: number;
  epsilon: number;
  center: boolean;
  scale: boolean;
  gamma?: LayerVariableLike;
  beta?: LayerVariableLike;
  movingMean: LayerVariableLike;
  movingVariance: LayerVariableLike;
  call(inputs: Tensor | Tensor[], kwargs: Record<string, unknown>): Tensor | Tensor[];
  getClassName(): string;
  layers?: BatchNormLayer[];
}

/** Every BatchNormalization layer of `model` (nested models included), in layer order. */
export function batchNormalizationLayers(model: LayersModel): BatchNormLayer[] {
  const found: BatchNormLayer[] = [];
  const visit = (layer: BatchNormLayer) => {
    for (const inner of layer.layers ?? []) visit(inner);
    if (layer.getClassName() === 'BatchNormalization') found.push(layer);
  };
  for (const layer of model.layers as unknown as BatchNormLayer[]) visit(layer);
  return found;
}

/** Makes every BatchNormalization layer of `model` use global-batch statistics in training. Returns their names. */
export function syncBatchNormalization(tf: Tf, model: LayersModel, collective: BlockingCollective): string[] {
  return batchNormalizationLayers(model).map(layer => {
    const stock = layer.call.bind(layer);
    layer.call = (inputs, kwargs) => {
      if (kwargs?.training !== true) return stock(inputs, kwargs);
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      return tf.tidy(() => syncForward(tf, layer, x, collective));
    };
    return layer.name;
  });
}

function syncForward(tf: Tf, layer: BatchNormLayer, input: Tensor, collective: BlockingCollective): Tensor {
  const ndim = input.rank;
  const axis = layer.axis >= 0 ? layer.axis : layer.axis + ndim;
  const axes = Array.from({ length: ndim }, (_, i) => i).filter(i => i !== axis);
  const C = input.shape[axis];
  const bshape = input.shape.map((d, i) => (i === axis ? d : 1));
  const gammaIn = layer.scale && layer.gamma ? layer.gamma.read() : tf.ones([C]);
  const betaIn = layer.center && layer.beta ? layer.beta.read() : tf.zeros([C]);
  const op = tf.customGrad(((x: Tensor, gamma: Tensor, beta: Tensor, save: (ts: Tensor[]) => void) => {
    // The global mean: Σx and the sample count over every device.
    const sums = new Float32Array(C + 1);
    sums.set(tf.sum(x, axes).dataSync() as Float32Array);
    sums[C] = x.size / C;
    collective.allReduce(sums, 0, C + 1, 'sum');
    const n = sums[C];
    const mean = tf.div(tf.tensor1d(sums.subarray(0, C)), n);
    const centered = tf.sub(x, tf.reshape(mean, bshape));
    // The global (biased) variance: Σ(x − mean)² over every device.
    const squares = Float32Array.from(tf.sum(tf.square(centered), axes).dataSync() as Float32Array);
    collective.allReduce(squares, 0, C, 'sum');
    const variance = tf.div(tf.tensor1d(squares), n);
    const invStd = tf.rsqrt(tf.add(variance, layer.epsilon));
    const xHat = tf.mul(centered, tf.reshape(invStd, bshape));
    const y = tf.add(tf.mul(xHat, tf.reshape(gamma, bshape)), tf.reshape(beta, bshape));
    movingAverage(tf, layer.movingMean, mean, layer.momentum);
    movingAverage(tf, layer.movingVariance, variance, layer.momentum);
    save([xHat, invStd, gamma]);
    return {
      value: y,
      gradFunc: (dy: Tensor, saved: Tensor[]) => {
        const [xh, inv, g] = saved;
        const local = new Float32Array(2 * C);
        const sumDy = tf.sum(dy, axes), sumDyXHat = tf.sum(tf.mul(dy, xh), axes);
        local.set(sumDy.dataSync() as Float32Array, 0);
        local.set(sumDyXHat.dataSync() as Float32Array, C);
        collective.allReduce(local, 0, 2 * C, 'sum');
        const meanDy = tf.reshape(tf.div(tf.tensor1d(local.subarray(0, C)), n), bshape);
        const meanDyXHat = tf.reshape(tf.div(tf.tensor1d(local.subarray(C)), n), bshape);
        const scale = tf.reshape(tf.mul(g, inv), bshape);
        const dx = tf.mul(scale, tf.sub(tf.sub(dy, meanDy), tf.mul(xh, meanDyXHat)));
        return [dx, sumDyXHat, sumDy];
      },
    };
  }) as never) as (x: Tensor, gamma: Tensor, beta: Tensor) => Tensor;
  return op(input, gammaIn, betaIn);
}

/** As tfjs-layers updates a moving statistic: moving − (moving − value)·(1 − momentum). */
function movingAverage(tf: Tf, variable: LayerVariableLike, value: Tensor, momentum: number): void {
  tf.tidy(() => {
    const orig = variable.read();
    variable.write(tf.sub(orig, tf.mul(tf.sub(orig, value), 1 - momentum)));
  });
}
