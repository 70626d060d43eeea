/**
 * BatchNormalization in training as two kernels where the backend's kernels are recorded for a step's replay (the
 * native backend: engine/kernel-trace.ts): the forward (y, the batch mean and variance, the count) and its gradient
 * (dx, dγ, dβ), the loops and all-reduces of batch-norm-training.ts in the same order, so the same bits. As kernels,
 * a recorded step replays them; tf.customGrad's closures over arrays (batch-norm-training.ts, every other engine)
 * would make a step's statistics values made outside kernels, which no recording can stand for.
 *
 * The collective of a sync BatchNormalization is an attribute by id (`registerCollective`): the kernel all-reduces on
 * it, in a replayed step as in a recorded one, in the same order on every device.
 */
import type { KernelFunc, NamedAttrMap, TensorInfo } from '@tensorflow/tfjs-core';
import type { MathBackendCPU } from '@tensorflow/tfjs-backend-cpu';
import type { BlockingCollective } from '../collectives/collective.js';
import type { Tensor, Tf } from '../engine/tfjs-types.js';
import { batchNormLoops, type ChannelGeometry } from '../engine/batch-norm-loops.js';
import { keepForLaterClosure, releaseKept } from '../engine/kept-for-closure.js';

export const BN_TRAIN_KERNEL = 'TandemBatchNormTraining';
export const BN_TRAIN_GRAD_KERNEL = 'TandemBatchNormTrainingGrad';

const COLLECTIVES: BlockingCollective[] = [];

/** The id of `collective` for the kernels' attributes (-1: none, this device's batch). */
export function registerCollective(collective: BlockingCollective | undefined): number {
  if (!collective) return -1;
  const known = COLLECTIVES.indexOf(collective);
  return known >= 0 ? known : COLLECTIVES.push(collective) - 1;
}

export function geometryOf(shape: readonly number[], axis: number): ChannelGeometry {
  const a = axis >= 0 ? axis : axis + shape.length;
  const prod = (dims: readonly number[]) => dims.reduce((p, d) => p * d, 1);
  return { outer: prod(shape.slice(0, a)), channels: shape[a], inner: prod(shape.slice(a + 1)) };
}

/** Σ over the devices of `local` (in place) when there is a collective. */
export function reduced(local: Float32Array, collective: BlockingCollective | undefined): Float32Array {
  collective?.allReduce(local, 0, local.length, 'sum');
  return local;
}

/** 1/√(var + ε) per channel, in double: the forward's and the gradient's (the same bits from the same variance). */
export function inverseStd(variance: Float32Array, epsilon: number): Float64Array {
  return Float64Array.from(variance, v => 1 / Math.sqrt(v + epsilon));
}

/** Registers both kernels and the gradient on the current backend (once per backend). */
export function registerBatchNormKernels(tf: Tf): void {
  const backendName = tf.getBackend();
  if (tf.getKernel(BN_TRAIN_KERNEL, backendName)) return;
  tf.registerKernel({ kernelName: BN_TRAIN_KERNEL, backendName, kernelFunc: forward as unknown as KernelFunc });
  tf.registerKernel({ kernelName: BN_TRAIN_GRAD_KERNEL, backendName, kernelFunc: gradient as unknown as KernelFunc });
  if (!tf.getGradient(BN_TRAIN_KERNEL)) registerGradient(tf);
}

interface KernelArgs {
  inputs: Record<string, TensorInfo>;
  attrs: NamedAttrMap;
  backend: MathBackendCPU;
}

/** A float32 input's values (read in place; widened by the backend where it holds them otherwise). */
function floats(backend: MathBackendCPU, t: TensorInfo): Float32Array {
  const values = backend.data.get(t.dataId)?.values;
  return values instanceof Float32Array ? values : (backend.readSync(t.dataId) as Float32Array);
}

function collectiveOf(attrs: NamedAttrMap): BlockingCollective | undefined {
  const id = attrs.collective as number;
  return id < 0 ? undefined : COLLECTIVES[id];
}

/** [y, mean, variance, count]: batchNormTraining's forward (batch-norm-training.ts), the same steps. */
function forward({ inputs, attrs, backend }: KernelArgs): TensorInfo[] {
  const { x } = inputs;
  const g = geometryOf(x.shape, attrs.axis as number);
  const C = g.channels;
  const collective = collectiveOf(attrs);
  const { channelSums, centeredSquareSums, normalize } = batchNormLoops();
  const xv = floats(backend, x),
    gv = floats(backend, inputs.gamma),
    bv = floats(backend, inputs.beta);
  const sums = new Float32Array(C + 1);
  sums.set(channelSums(xv, g));
  sums[C] = g.outer * g.inner;
  reduced(sums, collective);
  const n = sums[C];
  const mean = Float32Array.from(sums.subarray(0, C), s => s / n);
  const squares = Float32Array.from(centeredSquareSums(xv, mean, g));
  const variance = Float32Array.from(reduced(squares, collective), s => s / n);
  const invStd = inverseStd(variance, attrs.epsilon as number);
  const scale = Float64Array.from(invStd, (k, c) => gv[c] * k);
  const y = normalize(xv, mean, scale, bv, g, attrs.relu === true);
  return [
    backend.makeTensorInfo([...x.shape], 'float32', y),
    backend.makeTensorInfo([C], 'float32', mean),
    backend.makeTensorInfo([C], 'float32', variance),
    backend.makeTensorInfo([1], 'float32', Float32Array.of(n)),
  ];
}

/** [dx, dγ, dβ] from dy and the forward's x (its output z when relu is fused), mean, variance and count. */
function gradient({ inputs, attrs, backend }: KernelArgs): TensorInfo[] {
  const { x } = inputs;
  const g = geometryOf(x.shape, attrs.axis as number);
  const C = g.channels;
  const { gradientSums, inputGradient } = batchNormLoops();
  const dy = floats(backend, inputs.dy),
    xs = floats(backend, x),
    z = attrs.relu === true ? floats(backend, inputs.z) : undefined;
  const mean = floats(backend, inputs.mean),
    invStd = inverseStd(floats(backend, inputs.variance), attrs.epsilon as number);
  const n = floats(backend, inputs.count)[0];
  const local = gradientSums(dy, xs, mean, invStd, g, z);
  const global = reduced(Float32Array.from(local), collectiveOf(attrs));
  const dx = inputGradient(dy, xs, mean, invStd, floats(backend, inputs.gamma), global, n, g, z);
  return [
    backend.makeTensorInfo([...x.shape], 'float32', dx),
    backend.makeTensorInfo([C], 'float32', Float32Array.from(local.subarray(C))),
    backend.makeTensorInfo([C], 'float32', Float32Array.from(local.subarray(0, C))),
  ];
}

/**
 * The forward's gradient: one gradient kernel for dx, dγ and dβ, run by whichever closure the walk calls first; the
 * others take their part from it (kept for them: ../engine/kept-for-closure.ts).
 */
function registerGradient(tf: Tf): void {
  tf.registerGradient({
    kernelName: BN_TRAIN_KERNEL,
    inputsToSave: ['x', 'gamma'],
    outputsToSave: [true, true, true, true],
    gradFunc: (dys: Tensor | Tensor[], saved: Tensor[], attrs: NamedAttrMap) => {
      const [x, gamma, y, mean, variance, count] = saved;
      const dy = (dys as Tensor[])[0];
      let parts: Tensor[] | undefined;
      const part = (i: number) => () => {
        if (!parts) {
          const inputs = { dy, x, ...(attrs.relu === true ? { z: y } : {}), mean, variance, count, gamma };
          parts = tf.engine().runKernel(BN_TRAIN_GRAD_KERNEL, inputs, attrs) as unknown as Tensor[];
          for (const p of parts) keepForLaterClosure(tf.keep(p));
        }
        const out = tf.engine().runKernel('Identity', { x: parts[i] }) as Tensor; // the same data, this scope's
        releaseKept(parts[i]);
        return out;
      };
      return { x: part(0), gamma: part(1), beta: part(2) };
    },
  });
}
