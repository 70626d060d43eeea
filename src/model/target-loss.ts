/**
 * The loss on targets of a shape (a dataset's `targetShape`: an image, a sequence, several labels or floats per
 * sample), as tfjs-layers computes it in `model.fit`: the mean over the batch of its loss function of that name (each
 * sample's loss a mean or a sum over the last axis, then the mean over every other axis), and the accuracy tfjs's
 * `metrics: ['accuracy']` picks for that loss, as the mean over the samples times the rows (so that summed over the
 * devices and divided by the batch's samples it is the batch's mean).
 */
import type { Tensor, Tf } from '../engine/tfjs-types.js';
import { isRegressionLoss } from './loss-kinds.js';
import { regressionLoss, type OutputLoss } from './output-loss.js';
import { sparseCrossentropy } from './metric-values.js';

/** The batch's mean loss of `output` against `targets` (`[rows, ...targetShape]`), and its accuracy × rows. */
export function targetLoss(
  tf: Tf,
  output: Tensor,
  targets: Tensor,
  spec: OutputLoss,
): { loss: Tensor; correct: Tensor } {
  const rows = output.shape[0] ?? 1;
  if (isRegressionLoss(spec.kind))
    return { loss: regressionLoss(tf, spec.kind, tf.reshape(targets, output.shape), output), correct: tf.scalar(NaN) };
  const p = spec.fromProbabilities ? output : spec.kind === 'binary' ? tf.sigmoid(output) : tf.softmax(output);
  return tf.tidy(() => {
    if (spec.kind === 'binary') {
      const y = tf.reshape(targets, output.shape);
      const loss = tf.metrics.binaryCrossentropy(y, p).mean();
      return { loss, correct: tf.mul(tf.metrics.binaryAccuracy(y, p).mean(), rows) };
    }
    if (targets.shape.join() === output.shape.join()) {
      // one-hot (or soft) targets of the output's shape: categoricalCrossentropy
      const loss = tf.metrics.categoricalCrossentropy(targets, p).mean();
      return { loss, correct: tf.mul(tf.metrics.categoricalAccuracy(targets, p).mean(), rows) };
    }
    // class ids, the output's shape without its last axis (or with it of size 1): sparseCategoricalCrossentropy
    const ids = tf.reshape(targets, [...output.shape.slice(0, -1)]);
    const loss = sparseCrossentropy(tf, ids, p).mean();
    return { loss, correct: tf.mul(tf.metrics.sparseCategoricalAccuracy(ids, p).mean(), rows) };
  });
}
