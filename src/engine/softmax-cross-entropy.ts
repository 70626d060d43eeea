/**
 * A classifier's loss from logits in one kernel where the backend has it (the native backend:
 * native/softmax-cross-entropy-kernel.ts), with tfjs's bits: the mean softmax cross-entropy of logits [N, C] against
 * integer labels [N], and the count of correct predictions. Elsewhere the caller runs tfjs's ops.
 */
import type { Tensor, Tf } from './tfjs-types.js';

export const SOFTMAX_CE_KERNEL = 'TandemSoftmaxCrossEntropy';
export const SOFTMAX_CE_GRAD_KERNEL = 'TandemSoftmaxCrossEntropyGrad';

/** A tensor's (or a kernel input's) shape and dtype. */
interface Described {
  shape: readonly number[];
  dtype: string;
}

/**
 * Whether the fused kernel covers these inputs: float32 logits [N, C] and int32 labels [N], N ≥ 1 and C ≥ 2
 * (tf.oneHot's least depth, whose error tfjs's path keeps). The op asks before it runs the kernel, the kernel before
 * it reads them.
 */
export function fusedLossCovers(logits: Described, labels: Described): boolean {
  const [n, c] = logits.shape;
  return (
    logits.dtype === 'float32' &&
    logits.shape.length === 2 &&
    labels.dtype === 'int32' &&
    labels.shape.length === 1 &&
    labels.shape[0] === n &&
    n >= 1 &&
    c >= 2
  );
}

/**
 * `tf.losses.softmaxCrossEntropy(tf.oneHot(labels, C), logits)` and `tf.equal(tf.argMax(logits, -1), labels).sum()`
 * as one kernel on the current backend, or undefined where the backend has no such kernel or it does not cover the
 * inputs (`fusedLossCovers`).
 */
export function fusedSoftmaxCrossEntropy(
  tf: Tf,
  logits: Tensor,
  labels: Tensor,
): { loss: Tensor; correct: Tensor } | undefined {
  if (!fusedLossCovers(logits, labels) || !tf.getKernel(SOFTMAX_CE_KERNEL, tf.getBackend())) return undefined;
  const [loss, correct] = tf.engine().runKernel(SOFTMAX_CE_KERNEL, { logits, labels }, {}) as unknown as Tensor[];
  return { loss, correct };
}
