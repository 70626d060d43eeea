/**
 * tfjs's `tf.train.adamax`. State: m and the weighted infinity norm. tfjs's iteration counter is step - 1 (a resumed
 * run carries the step).
 */
import { defineOptimizer, real, type ResolvedOptimizer } from '../optimizer-definition.js';
import { BETA1, BETA2, EPSILON, f } from './common.js';

const options = {
  beta1: BETA1,
  beta2: BETA2,
  epsilon: EPSILON,
  decay: real('decay of the learning rate, lr / (1 + decay × iteration)', 0, { min: 0, max: 10 }),
} as const;
export type AdamaxConfig = ResolvedOptimizer<'adamax', typeof options>;

/** tfjs's `accBeta1` at `step` (from 1): float32 beta1 multiplied in step - 1 times, as its variable is. */
let accBeta1Memo = { beta1: NaN, step: 0, value: 0 };
export function adamaxAccBeta1(beta1: number, step: number): number {
  const b = f(beta1);
  let { step: k, value } = accBeta1Memo;
  if (accBeta1Memo.beta1 !== beta1 || k > step || k < 1) {
    k = 1;
    value = b;
  }
  for (; k < step; k++) value = f(value * b);
  accBeta1Memo = { beta1, step, value };
  return value;
}

export const adamax = defineOptimizer({
  name: 'adamax',
  kind: 'adamax',
  options,
  defaultLr: 0.002,
  stateSlots: () => 2,
  tfjsStateNames: ['m', 'v'],
  init: () => [0, 0],
  update(config, params, grads, state, start, end, step) {
    const b1 = f(config.beta1),
      keep1 = f(1 - config.beta1),
      b2 = f(config.beta2),
      eps = f(config.epsilon);
    const lrT = f(f(-config.lr) / f(f(f(step - 1) * f(config.decay)) + 1));
    const scale = f(lrT / f(1 - adamaxAccBeta1(config.beta1, step)));
    const [m, u] = state;
    for (let i = start; i < end; i++) {
      const g = grads[i];
      const mi = f(f(m[i] * b1) + f(g * keep1));
      const ui = Math.max(f(u[i] * b2), Math.abs(g));
      m[i] = mi;
      u[i] = ui;
      params[i] = f(f(scale * f(mi / f(ui + eps))) + params[i]);
    }
  },
  tfjs: (tf, o) => tf.train.adamax(o.lr, o.beta1, o.beta2, o.epsilon, o.decay),
});
