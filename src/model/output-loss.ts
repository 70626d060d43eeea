/**
 * The loss a model trains with, read from the model itself: sparse
 * categorical cross-entropy for a C-way output (from logits, or from
 * probabilities when a softmax produces the output, whatever layer applies
 * it), binary cross-entropy for a single output on two classes (from a
 * sigmoid, or from a logit); plus the model's regularization losses
 * (kernel, bias and activity regularizers), as `model.fit` adds them.
 */
import type { LayersModel, Tensor, Tf } from '../engine/tfjs-types.js';
import { isRegressionLoss, type LossKind, type RegressionLossKind } from './loss-kinds.js';
import { fusedSoftmaxCrossEntropy } from '../engine/softmax-cross-entropy.js';

export interface OutputLoss {
  kind: LossKind;
  /** The output is already a probability (softmax / sigmoid), not a logit. */
  fromProbabilities: boolean;
}

interface LayerLike {
  getClassName(): string;
  getConfig(): Record<string, unknown>;
  inboundNodes?: { inboundLayers: LayerLike[] }[];
}

/** The activation the model's (first) output ends in: the output layer's own, or a Softmax/Activation layer's. */
export function outputActivation(model: LayersModel): string {
  const layer =
    (model as unknown as { outputLayers?: LayerLike[] }).outputLayers?.[0] ??
    (model.layers[model.layers.length - 1] as unknown as LayerLike);
  if ((layer as unknown as { outputLayers?: unknown }).outputLayers) return outputActivation(layer as never); // nested
  const cls = layer.getClassName();
  if (cls === 'Softmax') return 'softmax';
  // TimeDistributed: the wrapped layer's
  const inner = cls === 'TimeDistributed' ? (layer as unknown as { layer?: LayerLike }).layer : undefined;
  const activation = (inner ?? layer).getConfig().activation;
  return typeof activation === 'string' ? activation : 'linear';
}

/** What the model's output is, for `classes` classes (a single output on two classes is binary), unless `kind` says. */
export function outputLossOf(model: LayersModel, classes: number, kind?: OutputLoss['kind']): OutputLoss {
  if (isRegressionLoss(kind)) return { kind, fromProbabilities: false };
  if (kind) return { kind, fromProbabilities: outputActivation(model) === (kind === 'binary' ? 'sigmoid' : 'softmax') };
  const units = model.outputs[0].shape[model.outputs[0].shape.length - 1];
  const activation = outputActivation(model);
  if (units === 1 && classes === 2) return { kind: 'binary', fromProbabilities: activation === 'sigmoid' };
  return { kind: 'categorical', fromProbabilities: activation === 'softmax' };
}

/**
 * The mean loss of `output` against `labels` (integer classes; float targets for a regression loss), and the number
 * of correct predictions (NaN for a regression).
 */
export function outputLoss(
  tf: Tf,
  output: Tensor,
  labels: Tensor,
  spec: OutputLoss,
  classes: number,
  classWeight?: number[],
): { loss: Tensor; correct: Tensor } {
  if (classWeight && !isRegressionLoss(spec.kind)) return weightedLoss(tf, output, labels, spec, classes, classWeight);
  if (isRegressionLoss(spec.kind)) {
    return { loss: regressionLoss(tf, spec.kind, tf.reshape(labels, output.shape), output), correct: tf.scalar(NaN) };
  }
  if (spec.kind === 'categorical') {
    // from logits, where the backend has it: one kernel for both, tfjs's bits (engine/softmax-cross-entropy.ts)
    const fromLogits = !spec.fromProbabilities && output.shape[output.rank - 1] === classes;
    const fused = fromLogits ? fusedSoftmaxCrossEntropy(tf, output, labels) : undefined;
    if (fused) return fused;
    const oneHot = tf.oneHot(labels as import('@tensorflow/tfjs').Tensor1D, classes);
    const loss = spec.fromProbabilities
      ? tf.metrics.categoricalCrossentropy(oneHot, output).mean()
      : tf.losses.softmaxCrossEntropy(oneHot, output);
    const correct = tf.tidy(() => tf.equal(tf.argMax(output, -1), labels).sum());
    return { loss, correct };
  }
  const y = tf.reshape(tf.cast(labels, 'float32'), output.shape);
  const loss = spec.fromProbabilities
    ? tf.metrics.binaryCrossentropy(y, output).mean()
    : tf.losses.sigmoidCrossEntropy(y, output);
  const threshold = spec.fromProbabilities ? 0.5 : 0;
  const correct = tf.tidy(() => tf.equal(tf.cast(tf.greater(output, threshold), 'float32'), y).sum());
  return { loss, correct };
}

/**
 * A classifier's loss with class weights, as tfjs's `model.fit({ classWeight })` computes it: each sample's loss times
 * its class's weight, then the mean over the batch (not divided by the weights' sum).
 */
function weightedLoss(
  tf: Tf,
  output: Tensor,
  labels: Tensor,
  spec: OutputLoss,
  classes: number,
  classWeight: number[],
): { loss: Tensor; correct: Tensor } {
  const weights = tf.tidy(() => tf.gather(tf.tensor1d(classWeight, 'float32'), tf.cast(labels, 'int32')));
  const none = tf.Reduction.NONE;
  let perSample: Tensor, correct: Tensor;
  if (spec.kind === 'categorical') {
    const oneHot = tf.oneHot(labels as import('@tensorflow/tfjs').Tensor1D, classes);
    perSample = spec.fromProbabilities
      ? tf.metrics.categoricalCrossentropy(oneHot, output)
      : tf.losses.softmaxCrossEntropy(oneHot, output, undefined, undefined, none);
    correct = tf.tidy(() => tf.equal(tf.argMax(output, -1), labels).sum());
  } else {
    const y = tf.reshape(tf.cast(labels, 'float32'), output.shape);
    perSample = spec.fromProbabilities
      ? tf.metrics.binaryCrossentropy(y, output)
      : tf.losses.sigmoidCrossEntropy(y, output, undefined, undefined, none).mean(-1);
    const threshold = spec.fromProbabilities ? 0.5 : 0;
    correct = tf.tidy(() => tf.equal(tf.cast(tf.greater(output, threshold), 'float32'), y).sum());
  }
  return { loss: tf.mul(tf.reshape(perSample, weights.shape), weights).mean(), correct };
}

/**
 * The mean over the batch of the per-sample regression loss of `output` against float targets `y` (same shape): the
 * ops tfjs-layers' loss of that name runs (losses.js; its epsilon is the backend's), on this thread's tfjs instance,
 * so one engine on the global batch and N devices averaging their shards compute the same mean.
 */
export function regressionLoss(tf: Tf, kind: RegressionLossKind, y: Tensor, output: Tensor): Tensor {
  return tf.tidy(() => {
    const eps = tf.backend().epsilon();
    switch (kind) {
      case 'mse':
        return tf.losses.meanSquaredError(y, output);
      case 'mae':
        return tf.metrics.meanAbsoluteError(y, output).mean(); // tfjs-layers' meanAbsoluteError
      case 'mape':
        return tf.metrics.meanAbsolutePercentageError(y, output).mean(); // 100 * |y - p| / max(|y|, eps)
      case 'huber':
        return tf.losses.huberLoss(y, output); // tfjs-core, delta 1
      case 'logcosh': {
        // d + softplus(-2d) - log 2, d = p - y
        const d = tf.sub(output, y);
        return tf
          .sub(tf.add(d, tf.softplus(tf.mul(-2, d))), Math.log(2))
          .mean(-1)
          .mean();
      }
      case 'msle': {
        // (log(1 + clip(p)) - log(1 + clip(y)))^2, clipped to [eps, max]
        const logOf = (t: Tensor) => tf.log(tf.add(1, tf.clipByValue(t, eps, Number.MAX_VALUE)));
        return tf
          .square(tf.sub(logOf(output), logOf(y)))
          .mean(-1)
          .mean();
      }
      case 'poisson': // p - y log(eps + p)
        return tf
          .sub(output, tf.mul(y, tf.log(tf.add(eps, output))))
          .mean(-1)
          .mean();
      default: {
        const unknown: never = kind;
        throw new Error(`regressionLoss: unknown loss ${String(unknown)}`);
      }
    }
  });
}

/** `loss` plus the model's regularization losses (as `model.fit` adds them); the loss itself when it has none. */
export function withRegularization(tf: Tf, model: LayersModel, loss: Tensor): Tensor {
  const penalties = (model as unknown as { calculateLosses(): Tensor[] }).calculateLosses();
  return penalties.length === 0 ? loss : tf.add(loss, tf.addN(penalties));
}
