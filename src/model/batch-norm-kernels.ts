/**
 * BatchNormalization in training as two kernels where the backend's kernels are recorded for a step's replay (the
 * native backend: engine/kernel-trace.ts): the forward (y, the batch mean and variance, the count) and its gradient
 * (dx, dγ, dβ), batch-norm-math.ts's loops and all-reduces as batch-norm-training.ts runs them: the same bits. As
 * kernels, a recorded step replays them; tf.customGrad's closures over arrays (batch-norm-training.ts, every other
 * engine) would make a step's statistics values made outside kernels, which no recording can stand for.
 *
 * The collective of a sync BatchNormalization is an attribute by id (`registerCollective`): the kernel all-reduces on
 * it, in a replayed step as in a recorded one, in the same order on every device.
 */
import type { KernelFunc, NamedAttrMap, TensorInfo } from '@tensorflow/tfjs-core';
import type { MathBackendCPU } from '@tensorflow/tfjs-backend-cpu';
import type { BlockingCollective } from '../collectives/collective.js';
import type { Tensor, Tf } from '../engine/tfjs-types.js';
import { geometryOf, gradients, inverseStd, statistics } from './batch-norm-math.js';
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

/** [y, mean, variance, count]: batchNormTraining's forward (batch-norm-math.ts's statistics). */
function forward({ inputs, attrs, backend }: KernelArgs): TensorInfo[] {
  const { x } = inputs;
  const g = geometryOf(x.shape, attrs.axis as number);
  const [gv, bv] = [floats(backend, inputs.gamma), floats(backend, inputs.beta)];
  const s = statistics(
    floats(backend, x),
    gv,
    bv,
    g,
    attrs.epsilon as number,
    attrs.relu === true,
    collectiveOf(attrs),
  );
  return [
    backend.makeTensorInfo([...x.shape], 'float32', s.y),
    backend.makeTensorInfo([g.channels], 'float32', s.mean),
    backend.makeTensorInfo([g.channels], 'float32', s.variance),
    backend.makeTensorInfo([1], 'float32', Float32Array.of(s.n)),
  ];
}

/** [dx, dγ, dβ] from dy and the forward's x (its output z when relu is fused), mean, variance and count. */
function gradient({ inputs, attrs, backend }: KernelArgs): TensorInfo[] {
  const { x } = inputs;
  const g = geometryOf(x.shape, attrs.axis as number);
  const z = attrs.relu === true ? floats(backend, inputs.z) : undefined;
  const forward = {
    mean: floats(backend, inputs.mean),
    invStd: inverseStd(floats(backend, inputs.variance), attrs.epsilon as number),
    n: floats(backend, inputs.count)[0],
  };
  const [dy, xs, gv] = [floats(backend, inputs.dy), floats(backend, x), floats(backend, inputs.gamma)];
  const { dx, dGamma, dBeta } = gradients(dy, xs, gv, forward, g, z, collectiveOf(attrs));
  return [
    backend.makeTensorInfo([...x.shape], 'float32', dx),
    backend.makeTensorInfo([g.channels], 'float32', dGamma),
    backend.makeTensorInfo([g.channels], 'float32', dBeta),
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
