/**
 * tfjs's `tf.train.sgd`, and `tf.train.momentum` (with Nesterov's look-ahead: `useNesterov`) when momentum > 0.
 * State: the momentum accumulation (momentum > 0 only).
 */
import { bad } from '../../config-checks.js';
import { defineOptimizer, flag, real, type ResolvedOptimizer } from '../optimizer-definition.js';
import { f } from './common.js';

const options = {
  momentum: real('the momentum (0: plain sgd)', 0.9, { min: 0, max: 0.9999 }, { inert: 0 }),
  nesterov: flag("Nesterov's look-ahead (needs momentum > 0)", { omitAtFallback: true, savedKeys: ['usenesterov'] }),
} as const;
export type SgdConfig = ResolvedOptimizer<'sgd', typeof options>;

/** The plain and the momentum rules, each operation rounded as tfjs's float32 tensors are. */
function sgdUpdate(
  config: SgdConfig,
  params: Float32Array,
  grads: Float32Array,
  state: Float32Array[],
  start: number,
  end: number,
): void {
  const { lr, momentum } = config;
  if (config.nesterov && momentum > 0) return nesterovUpdate(config, params, grads, state, start, end);
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
}

/**
 * tfjs: acc' = m·acc + g; p' = p + (−lr)·(g + m·acc'), each operation in float32.
 *
 * @example
 * // p = [1], g = [1], acc = [0], lr 0.1, momentum 0.5: acc 1, p 1 - 0.1 × 1.5 = 0.85
 */
export function nesterovUpdate(
  config: { lr: number; momentum: number },
  params: Float32Array,
  grads: Float32Array,
  state: Float32Array[],
  start: number,
  end: number,
): void {
  const m = f(config.momentum),
    c = f(-config.lr);
  const acc = state[0];
  for (let i = start; i < end; i++) {
    const g = grads[i];
    const a = f(f(m * acc[i]) + g);
    acc[i] = a;
    params[i] = f(f(c * f(g + f(a * m))) + params[i]);
  }
}

export const sgd = defineOptimizer({
  name: 'sgd',
  kind: 'sgd',
  options,
  defaultLr: 0.01,
  savedFallbacks: { momentum: 0 }, // tfjs's SGD is plain, where tandem's sgd defaults to momentum 0.9
  check(config) {
    if (config.nesterov && config.momentum === 0)
      bad(
        'nesterov',
        'needs momentum > 0 (Nesterov looks ahead along the momentum): give momentum, e.g. 0.9, or drop nesterov',
      );
  },
  stateSlots: config => (config.momentum > 0 ? 1 : 0),
  tfjsStateNames: ['momentum'],
  init: config => (config.momentum > 0 ? [0] : []),
  update: sgdUpdate,
  nativeUpdate(addon, config, params, grads, state, start, end) {
    // no C++ loop
    if (config.nesterov && config.momentum > 0) return sgdUpdate(config, params, grads, state, start, end);
    addon.sgdUpdate(params, grads, config.momentum > 0 ? state[0] : null, start, end, config.lr, config.momentum);
  },
  tfjs: (tf, o) => (o.momentum > 0 ? tf.train.momentum(o.lr, o.momentum, o.nesterov === true) : tf.train.sgd(o.lr)),
});

/** tfjs's `tf.train.momentum`: sgd with momentum, its own name. */
export const momentum = defineOptimizer({ ...sgd, name: 'momentum', savedFallbacks: undefined });
