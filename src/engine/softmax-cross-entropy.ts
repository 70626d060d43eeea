/**
 * A classifier's loss from logits in one kernel where the backend has it (the native backend:
 * native/softmax-cross-entropy-kernel.ts), with tfjs's bits: the mean softmax cross-entropy of logits [N, C] against
 * integer labels [N], and the count of correct predictions. Elsewhere the caller runs tfjs's ops.
 */
import type { Tensor, Tf } from './tfjs-types.js';

export const SOFTMAX_CE_KERNEL = 'TandemSoftmaxCrossEntropy';
export const SOFTMAX_CE_GRAD_KERNEL = 'TandemSoftmaxCrossEntropyGrad';

/**
 * `tf.losses.softmaxCrossEntropy(tf.oneHot(labels, C), logits)` and `tf.equal(tf.argMax(logits, -1), labels).sum()`
 * as one kernel on the current backend, or undefined where the backend has no such kernel or the inputs are not
 * float32 logits [N, C] and int32 labels [N]. C ≥ 2: tf.oneHot's least depth, whose error tfjs's path keeps.
 */
export function fusedSoftmaxCrossEntropy(
  tf: Tf,
  logits: Tensor,
  labels: Tensor,
): { loss: Tensor; correct: Tensor } | undefined {
  const [n, c] = logits.shape;
  if (logits.dtype !== 'float32' || logits.rank !== 2) return undefined;
  if (labels.dtype !== 'int32' || labels.rank !== 1) return undefined;
  if (n < 1 || c < 2 || labels.shape[0] !== n || !tf.getKernel(SOFTMAX_CE_KERNEL, tf.getBackend())) return undefined;
  const [loss, correct] = tf.engine().runKernel(SOFTMAX_CE_KERNEL, { logits, labels }, {}) as unknown as Tensor[];
  return { loss, correct };
}
