/**
 * Optimizers on flat Float32Arrays in shared memory, with exactly the update
 * rules of tfjs's own `tf.train.sgd`, `tf.train.momentum`, `tf.train.adam`,
 * `tf.train.rmsprop`, `tf.train.adagrad`, `tf.train.adamax` and
 * `tf.train.adadelta`, so that an update can run on any thread (the comm side
 * included) on a range of the parameters, and give what tfjs gives.
 * The rules of the last four are in tfjs-updates.ts.
 */
import {
  adadeltaUpdate,
  adagradUpdate,
  adamaxUpdate,
  nesterovUpdate,
  rmspropUpdate,
  type AdadeltaConfig,
  type AdagradConfig,
  type AdamaxConfig,
  type RmspropConfig,
} from './tfjs-updates.js';
export { TFJS_EPSILON } from './tfjs-updates.js';

export type OptimizerConfig =
  /** `nesterov`: tfjs's `tf.train.momentum(lr, momentum, true)` (momentum > 0). */
  | { kind: 'sgd'; lr: number; momentum: number; nesterov?: boolean }
  | { kind: 'adam'; lr: number; beta1: number; beta2: number; epsilon: number }
  | RmspropConfig
  | AdagradConfig
  | AdamaxConfig
  | AdadeltaConfig;

export type OptimizerKind = OptimizerConfig['kind'];

/** The names a user may give: every kind, and `momentum` (tfjs's `tf.train.momentum`: sgd with momentum). */
export const OPTIMIZERS = ['sgd', 'momentum', 'adam', 'rmsprop', 'adagrad', 'adamax', 'adadelta'] as const;
export type OptimizerName = (typeof OPTIMIZERS)[number];

/**
 * How many floats of state the optimizer keeps per parameter, in this order:
 * sgd its momentum accumulation (momentum > 0 only); adam m, v; rmsprop the mean square, the moment
 * (as tfjs, even at momentum 0) and, centered, the mean gradient; adagrad the accumulated squares;
 * adamax m and the weighted infinity norm; adadelta the accumulated squares of gradients and of updates.
 */
export function optimizerStateSlots(config: OptimizerConfig): number {
  switch (config.kind) {
    case 'sgd':
      return config.momentum > 0 ? 1 : 0;
    case 'adam':
      return 2;
    case 'rmsprop':
      return config.centered ? 3 : 2;
    case 'adagrad':
      return 1;
    case 'adamax':
      return 2;
    case 'adadelta':
      return 2;
    default: {
      const never: never = config;
      throw new Error(`unknown optimizer ${String(never)}`);
    }
  }
}

/** Each state slot's value before the first step: 0, but adagrad's accumulator starts at `initialAccumulatorValue` (as tfjs's `fill`). */
export function initialOptimizerState(config: OptimizerConfig): number[] {
  const slots = optimizerStateSlots(config);
  return Array.from({ length: slots }, () =>
    config.kind === 'adagrad' ? Math.fround(config.initialAccumulatorValue) : 0,
  );
}

/** Sets freshly allocated state slots to their values before the first step (`initialOptimizerState`). */
export function fillInitialOptimizerState(config: OptimizerConfig, state: Float32Array[]): void {
  initialOptimizerState(config).forEach((v, j) => {
    if (v !== 0) state[j].fill(v);
  });
}

/** Adam's bias corrections at `step` (from 1), as tfjs computes them: 1 - fround(beta^step). */
export function adamBiasCorrections(config: { beta1: number; beta2: number }, step: number): [number, number] {
  return [1 - Math.fround(Math.pow(config.beta1, step)), 1 - Math.fround(Math.pow(config.beta2, step))];
}

/**
 * Applies one update to params[start, end) from grads[start, end).
 * `state` holds `optimizerStateSlots` arrays as long as params; `step` counts from 1.
 */
export function applyUpdate(
  config: OptimizerConfig,
  params: Float32Array,
  grads: Float32Array,
  state: Float32Array[],
  start: number,
  end: number,
  step: number,
): void {
  switch (config.kind) {
    case 'sgd': {
      const { lr, momentum } = config;
      if (config.nesterov && momentum > 0) {
        nesterovUpdate(config, params, grads, state, start, end);
      } else if (momentum > 0) {
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
        params[i] = Math.fround(params[i] - (lr * (mi / c1)) / (Math.sqrt(vi / c2) + epsilon));
      }
      return;
    }
    case 'rmsprop':
      rmspropUpdate(config, params, grads, state, start, end);
      return;
    case 'adagrad':
      adagradUpdate(config, params, grads, state, start, end);
      return;
    case 'adamax':
      adamaxUpdate(config, params, grads, state, start, end, step);
      return;
    case 'adadelta':
      adadeltaUpdate(config, params, grads, state, start, end);
      return;
    default: {
      const never: never = config;
      throw new Error(`unknown optimizer ${String(never)}`);
    }
  }
}
