/**
 * tfjs's `tf.train.adadelta`. State: the accumulated squares of gradients and of updates. tfjs's quirk is kept on
 * purpose: it scales the gradient by the accumulated squares *before* this step's gradient, so from zero state its
 * two accumulators stay equal, the scale is exactly 1 and the update is p - lr × g: tfjs's adadelta is sgd.
 */
import { defineOptimizer, real, type ResolvedOptimizer } from '../optimizer-definition.js';
import { EPSILON, f } from './common.js';

const options = {
  rho: real('decay of its accumulators', 0.95, { min: 0, max: 1, maxOpen: true }),
  epsilon: EPSILON,
} as const;
export type AdadeltaConfig = ResolvedOptimizer<'adadelta', typeof options>;

export const adadelta = defineOptimizer({
  name: 'adadelta',
  kind: 'adadelta',
  options,
  defaultLr: 0.001,
  stateSlots: () => 2,
  tfjsStateNames: ['accum_grad', 'accum_var'],
  init: () => [0, 0],
  update(config, params, grads, state, start, end) {
    const rho = f(config.rho),
      keep = f(1 - config.rho),
      eps = f(config.epsilon),
      minusLr = f(-config.lr);
    const [accG, accU] = state;
    for (let i = start; i < end; i++) {
      const g = grads[i],
        ag = accG[i],
        au = accU[i];
      const update = f(f(f(Math.sqrt(f(au + eps))) / f(Math.sqrt(f(ag + eps)))) * g); // the accumulator before
      accG[i] = f(f(ag * rho) + f(f(g * g) * keep));
      accU[i] = f(f(au * rho) + f(f(update * update) * keep));
      params[i] = f(f(update * minusLr) + params[i]);
    }
  },
  tfjs: (tf, o) => tf.train.adadelta(o.lr, o.rho, o.epsilon),
});
