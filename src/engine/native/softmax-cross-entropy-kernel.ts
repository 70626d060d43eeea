/**
 * A classifier's loss from logits as one kernel on the native backend (called by ../softmax-cross-entropy.ts):
 * `TandemSoftmaxCrossEntropy` takes logits [N, C] (float32) and integer labels [N], and gives what
 * `tf.losses.softmaxCrossEntropy(tf.oneHot(labels, C), logits)` (the batch mean) and
 * `tf.equal(tf.argMax(logits, -1), labels).sum()` (the correct predictions) give; `TandemSoftmaxCrossEntropyGrad` is
 * its gradient for the logits. tfjs runs ~30 kernels forward and ~10 backward for them, each paying tfjs's cost per
 * kernel (tensor objects, the tape, the kernel lookup): half a millisecond of a mnist-node step, more than its
 * softmax's arithmetic on 32 × 10 numbers.
 *
 * The same float32 operations in the same order as tfjs's cpu kernels (each op's result rounded to float32, the sums
 * accumulated in double as tfjs's Sum, the maximum and argmax as tfjs finds them, NaN included), so loss, count and
 * gradient are tfjs's bits: test/softmax-cross-entropy-kernel.test.ts compares them with tfjs's ops. A label outside
 * [0, C) is a row of zeros, as tf.oneHot makes it.
 */
import type { MathBackendCPU } from '@tensorflow/tfjs-backend-cpu';
import type { NamedAttrMap, TensorInfo } from '@tensorflow/tfjs-core';
import type { Tensor, Tf } from '../tfjs-types.js';
import { fusedLossCovers, SOFTMAX_CE_GRAD_KERNEL, SOFTMAX_CE_KERNEL } from '../softmax-cross-entropy.js';
import { float32Values, output, overwrittenOutput, type NativeKernel } from './native-kernel.js';

const f32 = Math.fround;

interface LossInputs {
  logits: Float32Array;
  labels: Int32Array;
  n: number;
  c: number;
}

/** The kernel's inputs when it covers them (`fusedLossCovers`), read from the backend. */
function lossInputs(backend: MathBackendCPU, logitsInfo?: TensorInfo, labelsInfo?: TensorInfo): LossInputs | undefined {
  if (!logitsInfo || !labelsInfo || !fusedLossCovers(logitsInfo, labelsInfo)) return undefined;
  const [n, c] = logitsInfo.shape;
  const logits = float32Values(backend, logitsInfo),
    labels = backend.data.get(labelsInfo.dataId)?.values;
  return logits && labels instanceof Int32Array ? { logits, labels, n, c } : undefined;
}

/**
 * Row i's log-softmax into `out` as tfjs's logSumExp and Sub compute it: x − (max + log Σ exp(x − max)), where max is
 * tfjs's Max (a NaN wins).
 */
function logSoftmaxRow(x: Float32Array, at: number, c: number, out: Float32Array): void {
  let max = x[at];
  for (let j = 0; j < c; j++) {
    const v = x[at + j];
    if (Number.isNaN(v) || v > max) max = v;
  }
  let sum = 0;
  for (let j = 0; j < c; j++) sum += f32(Math.exp(f32(x[at + j] - max)));
  const lse = f32(max + f32(Math.log(f32(sum))));
  for (let j = 0; j < c; j++) out[j] = f32(x[at + j] - lse);
}

/** tfjs's ArgMax of row i: the first of the largest (a NaN never wins, a NaN first stays). */
function argMaxRow(x: Float32Array, at: number, c: number): number {
  let max = x[at],
    index = 0;
  for (let j = 0; j < c; j++)
    if (x[at + j] > max) {
      max = x[at + j];
      index = j;
    }
  return index;
}

/** The batch's mean loss (float32) and its count of correct predictions. */
export function softmaxCrossEntropy({ logits, labels, n, c }: LossInputs): { loss: number; correct: number } {
  const logResult = new Float32Array(c);
  let total = 0,
    correct = 0;
  for (let i = 0; i < n; i++) {
    logSoftmaxRow(logits, i * c, c, logResult);
    const label = labels[i];
    let cost = 0; // Σ_j −(logResult_j · onehot_j), each term rounded as tfjs's Mul then Neg
    for (let j = 0; j < c; j++) cost += -f32(logResult[j] * (j === label ? 1 : 0));
    total += f32(cost);
    if (argMaxRow(logits, i * c, c) === label) correct++;
  }
  return { loss: f32(f32(total) / n), correct };
}

/**
 * d loss / d logits for the loss's gradient `dy`, as tfjs's chain computes it: RealDiv's dy / N, Sum's broadcast,
 * then the custom gradient's dy · (exp(logResult) − onehot).
 */
export function softmaxCrossEntropyGrad({ logits, labels, n, c }: LossInputs, dy: number, out: Float32Array): void {
  const perSample = f32(dy / n);
  const logResult = new Float32Array(c);
  for (let i = 0; i < n; i++) {
    logSoftmaxRow(logits, i * c, c, logResult);
    for (let j = 0; j < c; j++)
      out[i * c + j] = f32(perSample * f32(f32(Math.exp(logResult[j])) - (j === labels[i] ? 1 : 0)));
  }
}

export function softmaxCrossEntropyKernels(): NativeKernel[] {
  return [
    {
      kernelName: SOFTMAX_CE_KERNEL,
      run({ inputs, backend }) {
        const at = lossInputs(backend, inputs.logits, inputs.labels);
        if (!at) return undefined;
        const { loss, correct } = softmaxCrossEntropy(at);
        return [
          backend.makeTensorInfo([], 'float32', new Float32Array([loss])),
          backend.makeTensorInfo([], 'int32', new Int32Array([correct])),
        ];
      },
    },
    {
      kernelName: SOFTMAX_CE_GRAD_KERNEL,
      run({ inputs, backend }) {
        const at = lossInputs(backend, inputs.logits, inputs.labels),
          dy = float32Values(backend, inputs.dy);
        if (!at || !dy || dy.length !== 1) return undefined;
        const out = overwrittenOutput(at.n * at.c);
        softmaxCrossEntropyGrad(at, dy[0], out);
        return output(backend, [at.n, at.c], out);
      },
    },
  ];
}

/** The fused loss's gradient: the logits' through `SOFTMAX_CE_GRAD_KERNEL`; the labels (integers) get zeros. */
export function registerSoftmaxCrossEntropyGradient(tf: Tf): void {
  tf.registerGradient({
    kernelName: SOFTMAX_CE_KERNEL,
    inputsToSave: ['logits', 'labels'],
    gradFunc: (dy: Tensor | Tensor[], saved: Tensor[], _attrs: NamedAttrMap) => {
      const [logits, labels] = saved;
      const dLoss = Array.isArray(dy) ? dy[0] : dy; // the count's dy is not a gradient
      return {
        logits: () => tf.engine().runKernel(SOFTMAX_CE_GRAD_KERNEL, { logits, labels, dy: dLoss }) as Tensor,
        labels: () => tf.zerosLike(labels),
      };
    },
  });
}
