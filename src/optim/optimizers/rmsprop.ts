/**
 * tfjs's `tf.train.rmsprop`, operation for operation. State: the mean square, the moment (as tfjs, even at
 * momentum 0) and, centered, the mean gradient. tfjs's quirk is kept on purpose: centered takes the square root of
 * ms - (mg² + ε), NaN wherever the variance estimate is under ε, a parameter whose gradient is 0 included.
 */
import { defineOptimizer, flag, real, type ResolvedOptimizer } from '../optimizer-definition.js';
import { EPSILON, f } from './common.js';

const options = {
  decay: real("decay of the mean square (keras's rho)", 0.9, { min: 0, max: 1, maxOpen: true }),
  momentum: real('the momentum', 0, { min: 0, max: 0.9999 }, { inert: 0 }),
  epsilon: EPSILON,
  centered: flag('divide by the estimated variance, not the mean square'),
} as const;
export type RmspropConfig = ResolvedOptimizer<'rmsprop', typeof options>;

export const rmsprop = defineOptimizer({
  name: 'rmsprop',
  kind: 'rmsprop',
  options,
  defaultLr: 0.001,
  foreignHints: { rho: "keras's rho is rmsprop's decay here: set decay instead" },
  stateSlots: config => (config.centered ? 3 : 2),
  tfjsStateNames: ['rms', 'momentum', 'mg'],
  init: config => (config.centered ? [0, 0, 0] : [0, 0]),
  update(config, params, grads, state, start, end) {
    const decay = f(config.decay),
      keep = f(1 - config.decay),
      lr = f(config.lr),
      momentum = f(config.momentum),
      eps = f(config.epsilon);
    const [ms, mom, mg] = state;
    for (let i = start; i < end; i++) {
      const g = grads[i];
      const s = f(f(ms[i] * decay) + f(f(g * g) * keep));
      let denominator: number;
      if (config.centered) {
        const mgi = f(f(mg[i] * decay) + f(g * keep));
        mg[i] = mgi;
        denominator = f(Math.sqrt(f(s - f(f(mgi * mgi) + eps)))); // tfjs: sqrt(ms - (mg² + ε))
      } else {
        denominator = f(Math.sqrt(f(s + eps)));
      }
      const m = f(f(mom[i] * momentum) + f(f(g * lr) / denominator));
      ms[i] = s;
      mom[i] = m;
      params[i] = f(params[i] - m);
    }
  },
  tfjs: (tf, o) => tf.train.rmsprop(o.lr, o.decay, o.momentum, o.epsilon, o.centered),
  nanHint: config =>
    config.centered
      ? "; with rmsprop centered, the likely cause is tfjs's own rule, which tandem keeps: it takes " +
        'sqrt(ms - (mg² + epsilon)), NaN for every parameter whose gradient varies by less than epsilon ' +
        '(a zero gradient included), from its first update: drop --centered (centered: false)'
      : '',
});
