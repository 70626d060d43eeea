/**
 * BatchNormalization in training as flat loops over the tensor's values: the
 * per-channel statistics, the normalisation, and the gradient in two passes —
 * where tfjs composes moments, broadcasting arithmetic and their gradients
 * from a dozen kernels (on the cpu-based engines each walks its indices
 * through generic broadcasting: ~70 ms forward and ~250 ms backward at a
 * 32x16x16x32 activation; a few ms here, in C++ when the native addon loaded:
 * src/engine/batch-norm-loops.ts). Same formulas as tfjs: the mean, the
 * biased variance mean((x − mean)²) with squares rounded to float32,
 * y = β + (x − mean)·γ / √(var + ε) in double; sums in double.
 *
 * With a `collective`, the statistics are those of the global batch (sync
 * BatchNormalization): Σx and the count, then Σ(x − mean)², then in backward
 * Σdy and Σdy·x̂ are all-reduced (blocking: inside tfjs's synchronous forward
 * and backward), and dx is the gradient of the sum of every device's loss.
 * γ and β get this device's own sums, which the gradient pipeline averages
 * like every other gradient. Without one, the batch is this device's.
 *
 * @example
 * const { y, mean, variance } = batchNormTraining(tf, x, gamma, beta, { axis: -1, epsilon: 1e-3 });
 */
import type { BlockingCollective } from '../collectives/collective.js';
import type { Tensor, Tf } from '../engine/tfjs-types.js';
import { geometryOf, gradients, statistics, type BatchStatistics } from './batch-norm-math.js';
import { hostFloats } from '../engine/host-floats.js';

export interface BatchNormTrainingOptions {
  /** The channel axis (negative counts from the end). */
  axis: number;
  epsilon: number;
  /** All-reduces the statistics over the devices (sync mode); absent: this device's batch only. */
  collective?: BlockingCollective;
  /**
   * y is relu(the normalised x): the relu layer after it, fused in (one pass fewer forward, no relu gradient written
   * backward). The same bits as the two apart.
   */
  relu?: boolean;
}

export interface BatchNormTrainingResult {
  y: Tensor;
  /** The batch mean and biased variance per channel (global with a collective), for the moving statistics. */
  mean: Tensor;
  variance: Tensor;
}

/** y, the batch mean and the batch variance of x (any rank, any channel axis), with tfjs's gradients for x, γ and β. */
export function batchNormTraining(
  tf: Tf,
  x: Tensor,
  gamma: Tensor,
  beta: Tensor,
  options: BatchNormTrainingOptions,
): BatchNormTrainingResult {
  const g = geometryOf(x.shape, options.axis);
  let stats: BatchStatistics | undefined;
  // x is saved for the gradient (tfjs keeps it alive until then) and read there again: an array read now is the
  // tensor's own on the native backend (hostFloats), recycled once the tensor is dropped.
  const op = tf.customGrad(((xIn: Tensor, gammaIn: Tensor, betaIn: Tensor, save: (t: Tensor[]) => void) => {
    if (!options.relu) save([xIn]);
    const gv = gammaIn.dataSync() as Float32Array;
    const [xv, bv] = [hostFloats(tf, xIn), betaIn.dataSync() as Float32Array];
    const forward = statistics(xv, gv, bv, g, options.epsilon, options.relu === true, options.collective);
    stats = forward;
    const value = tf.tensor(forward.y, x.shape, 'float32');
    if (options.relu) save([xIn, value]); // relu's derivative is read from its output
    return {
      value,
      gradFunc: (dy: Tensor, saved: Tensor[]) => {
        const z = options.relu ? hostFloats(tf, saved[1]) : undefined;
        const [dyv, xs] = [hostFloats(tf, dy), hostFloats(tf, saved[0])];
        const { dx, dGamma, dBeta } = gradients(dyv, xs, gv, forward, g, z, options.collective);
        return [tf.tensor(dx, x.shape, 'float32'), tf.tensor(dGamma, [g.channels]), tf.tensor(dBeta, [g.channels])];
      },
    };
  }) as never) as (x: Tensor, gamma: Tensor, beta: Tensor) => Tensor;
  const y = op(x, gamma, beta);
  return { y, mean: tf.tensor1d(stats!.mean), variance: tf.tensor1d(stats!.variance) };
}
