/** tfjs's `tf.train.adagrad`. State: the accumulated squares, from `initialAccumulatorValue` (as tfjs's `fill`). */
import { defineOptimizer, real, type ResolvedOptimizer } from '../optimizer-definition.js';
import { TFJS_EPSILON, f } from './common.js';

const options = {
  initialAccumulatorValue: real(
    "the accumulator's value before the first step",
    0.1,
    { min: 0, max: 1e6 },
    {
      flag: 'initial-accumulator',
    },
  ),
} as const;
export type AdagradConfig = ResolvedOptimizer<'adagrad', typeof options>;

export const adagrad = defineOptimizer({
  name: 'adagrad',
  kind: 'adagrad',
  options,
  defaultLr: 0.01,
  stateSlots: () => 1,
  tfjsStateNames: ['accumulator'],
  init: config => [Math.fround(config.initialAccumulatorValue)],
  update(config, params, grads, state, start, end) {
    const minusLr = f(-config.lr),
      eps = f(TFJS_EPSILON); // tfjs's adagrad has no epsilon of its own: it adds the backend's
    const acc = state[0];
    for (let i = start; i < end; i++) {
      const g = grads[i];
      const a = f(acc[i] + f(g * g));
      acc[i] = a;
      params[i] = f(f(f(g / f(Math.sqrt(f(a + eps)))) * minusLr) + params[i]);
    }
  },
  tfjs: (tf, o) => tf.train.adagrad(o.lr, o.initialAccumulatorValue),
});
