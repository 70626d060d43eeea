/**
 * The loss a model trains with, read from the model itself: sparse
 * categorical cross-entropy for a C-way output (from logits, or from
 * probabilities when a softmax produces the output, whatever layer applies
 * it), binary cross-entropy for a single output on two classes (from a
 * sigmoid, or from a logit); plus the model's regularization losses
 * (kernel, bias and activity regularizers), as `model.fit` adds them.
 */
import type { LayersModel, Tensor, Tf } from '../engine/tfjs-types.js';

export interface OutputLoss {
  kind: 'categorical' | 'binary' | 'mse';
  /** The output is already a probability (softmax / sigmoid), not a logit. */
  fromProbabilities: boolean;
}

interface LayerLike { getClassName(): string; getConfig(): Record<string, unknown>; inboundNodes?: { inboundLayers: LayerLike[] }[] }

/** The activation the model's (first) output ends in: the output layer's own, or a Softmax/Activation layer's. */
export function outputActivation(model: LayersModel): string {
  const layer = (model as unknown as { outputLayers?: LayerLike[] }).outputLayers?.[0] ?? (model.layers[model.layers.length - 1] as unknown as LayerLike);
  const cls = layer.getClassName();
  if (cls === 'Softmax') return 'softmax';
  const activation = layer.getConfig().activation;
  return typeof activation === 'string' ? activation : 'linear';
}

/** What the model's output is, for `classes` classes (a single output on two classes is binary), unless `kind` says. */
export function outputLossOf(model: LayersModel, classes: number, kind?: OutputLoss['kind']): OutputLoss {
  if (kind === 'mse') return { kind, fromProbabilities: false };
  if (kind) return { kind, fromProbabilities: outputActivation(model) === (kind === 'binary' ? 'sigmoid' : 'softmax') };
  const units = model.outputs[0].shape[model.outputs[0].shape.length - 1];
  const activation = outputActivation(model);
  if (units === 1 && classes === 2) return { kind: 'binary', fromProbabilities: activation === 'sigmoid' };
  return { kind: 'categorical', fromProbabilities: activation === 'softmax' };
}

/** The mean loss of `output` against `labels` (integer classes; float targets for mse), and the number of correct predictions (NaN for mse). */
export function outputLoss(tf: Tf, output: Tensor, labels: Tensor, spec: OutputLoss, classes: number): { loss: Tensor; correct: Tensor } {
  if (spec.kind === 'mse') {
    return { loss: tf.losses.meanSquaredError(tf.reshape(labels, output.shape), output), correct: tf.scalar(NaN) };
  }
  if (spec.kind === 'categorical') {
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

/** `loss` plus the model's regularization losses (as `model.fit` adds them); the loss itself when it has none. */
export function withRegularization(tf: Tf, model: LayersModel, loss: Tensor): Tensor {
  const penalties = (model as unknown as { calculateLosses(): Tensor[] }).calculateLosses();
  return penalties.length === 0 ? loss : tf.add(loss, tf.addN(penalties));
}
