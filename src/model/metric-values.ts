/**
 * tfjs's metrics, by the name of tfjs's function, computed on a device's share of a batch so that the shares add up to
 * the batch's value, one engine's: each metric gives two sums, and the batch's value is the first's sum over the
 * devices divided by the second's (0 when that is 0). A mean metric (accuracies, cross-entropies, mse, mae, mape,
 * cosineProximity: tfjs takes the mean of the function's output over the batch) gives (mean × rows, rows); precision
 * and recall, ratios over the batch, give (true positives, their denominator), as tfjs computes them.
 */
import type { Tensor, Tf } from '../engine/tfjs-types.js';

type Fn = (tf: Tf, y: Tensor, p: Tensor) => Tensor;

/** tfjs-layers' sparseCategoricalCrossentropy: class ids one-hot, the output clipped before the categorical one. */
export function sparseCrossentropy(tf: Tf, ids: Tensor, p: Tensor): Tensor {
  const eps = tf.backend().epsilon();
  const units = p.shape[p.shape.length - 1];
  const oneHot = tf.reshape(tf.oneHot(tf.cast(tf.floor(tf.reshape(ids, [-1])), 'int32'), units), p.shape);
  return tf.metrics.categoricalCrossentropy(oneHot, tf.clipByValue(p, eps, 1 - eps));
}

/** The mean metrics: the function tfjs averages over the batch. */
const MEAN_METRICS: Readonly<Record<string, Fn>> = {
  binaryAccuracy: (tf, y, p) => tf.metrics.binaryAccuracy(y, p),
  categoricalAccuracy: (tf, y, p) => tf.metrics.categoricalAccuracy(y, p),
  sparseCategoricalAccuracy: (tf, y, p) => tf.metrics.sparseCategoricalAccuracy(y, p),
  binaryCrossentropy: (tf, y, p) => tf.metrics.binaryCrossentropy(y, p),
  categoricalCrossentropy: (tf, y, p) => tf.metrics.categoricalCrossentropy(y, p),
  sparseCategoricalCrossentropy: sparseCrossentropy,
  meanSquaredError: (tf, y, p) => tf.metrics.meanSquaredError(y, p),
  meanAbsoluteError: (tf, y, p) => tf.metrics.meanAbsoluteError(y, p),
  meanAbsolutePercentageError: (tf, y, p) => tf.metrics.meanAbsolutePercentageError(y, p),
  cosineProximity: (tf, y, p) => tf.metrics.cosineProximity(y, p),
};

/** precision and recall: (true positives, true positives + false positives / false negatives), as tfjs counts them. */
const RATIO_METRICS: Readonly<Record<string, (tf: Tf, y: Tensor, p: Tensor) => [Tensor, Tensor]>> = {
  precision: (tf, y, p) => {
    const tp = tf.sum(tf.logicalAnd(tf.equal(y, 1), tf.equal(p, 1)));
    return [tp, tf.add(tp, tf.sum(tf.logicalAnd(tf.equal(y, 0), tf.equal(p, 1))))];
  },
  recall: (tf, y, p) => {
    const tp = tf.sum(tf.logicalAnd(tf.equal(y, 1), tf.equal(p, 1)));
    return [tp, tf.add(tp, tf.sum(tf.logicalAnd(tf.equal(y, 1), tf.equal(p, 0))))];
  },
};

/** The metric functions tandem computes, by the name of tfjs's function. */
export const METRIC_FUNCTIONS: readonly string[] = [...Object.keys(MEAN_METRICS), ...Object.keys(RATIO_METRICS)];

/** The two sums of each of `names` on output `p` against targets `y` (`[rows, ...]`), flattened: a float32 tensor. */
export function metricSums(tf: Tf, names: readonly string[], y: Tensor, p: Tensor): Tensor {
  return tf.tidy(() => {
    const rows = p.shape[0] ?? 1;
    const parts = names.flatMap(name => {
      if (Object.hasOwn(RATIO_METRICS, name)) return RATIO_METRICS[name](tf, y, p).map(t => tf.cast(t, 'float32'));
      const mean = tf.mean(MEAN_METRICS[name](tf, y, p));
      return [tf.mul(mean, rows), tf.scalar(rows)];
    });
    return tf.stack(parts);
  });
}

/** A batch's value of each metric from the sums of its devices. */
export function metricValues(sums: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < sums.length; i += 2) out.push(sums[i + 1] === 0 ? 0 : sums[i] / sums[i + 1]);
  return out;
}
