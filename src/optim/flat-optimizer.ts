/**
 * Optimizers on flat Float32Arrays in shared memory, with exactly the update
 * rules of tfjs's own `tf.train.sgd`, `tf.train.momentum` and `tf.train.adam`,
 * so that an update can run on any thread (the comm side included) on a range
 * of the parameters, and give what tfjs gives.
 */
export type OptimizerConfig =
  | { kind: 'sgd'; lr: number; momentum: number }
  | { kind: 'adam'; lr: number; beta1: number; beta2: number; epsilon: number };

export const OPTIMIZERS = ['sgd', 'adam'] as const;
export type OptimizerName = (typeof OPTIMIZERS)[number];

/** How many floats of state the optimizer keeps per parameter. */
export function optimizerStateSlots(config: OptimizerConfig): number {
  switch (config.kind) {
    case 'sgd': return config.momentum > 0 ? 1 : 0;
    case 'adam': return 2;
    default: { const never: never = config; throw new Error(`unknown optimizer ${String(never)}`); }
  }
}

/** Adam's bias corrections at `step` (from 1), as tfjs computes them: 1 - fround(beta^step). */
export function adamBiasCorrections(config: { beta1: number; beta2: number }, step: number): [number, number] {
  return [1 - Math.fround(Math.pow(config.beta1, step)), 1 - Math.fround(Math.pow(config.beta2, step))];
}

/**
 * Applies one update to params[start, end) from grads[start, end).
 * `state` holds `optimizerStateSlots` arrays as long as params; `step` counts from 1.
 */
export function applyUpdate(config: OptimizerConfig, params: Float32Array, grads: Float32Array,
  state: Float32Array[], start: number, end: number, step: number): void {
  switch (config.kind) {
    case 'sgd': {
      const { lr, momentum } = config;
      if (momentum > 0) {
        const acc = state[0];
        for (let i = start; i < end; i++) {
          const a = Math.fround(acc[i] * momentum + grads[i]);
          acc[i] = a;
          params[i] = Math.fround(params[i] - lr * a);
        }
      } else {
        for (let i = start; i < end; i++) params[i] = Math.fround(params[i] - lr * grads[i]);
      }
      return;
    }
    case 'adam': {
      const { lr, beta1, beta2, epsilon } = config;
      const [m, v] = state;
      const [c1, c2] = adamBiasCorrections(config, step);
      for (let i = start; i < end; i++) {
        const g = grads[i];
        const mi = Math.fround(beta1 * m[i] + (1 - beta1) * g);
        const vi = Math.fround(beta2 * v[i] + (1 - beta2) * g * g);
        m[i] = mi;
        v[i] = vi;
        params[i] = Math.fround(params[i] - lr * (mi / c1) / (Math.sqrt(vi / c2) + epsilon));
      }
      return;
    }
    default: { const never: never = config; throw new Error(`unknown optimizer ${String(never)}`); }
  }
}
