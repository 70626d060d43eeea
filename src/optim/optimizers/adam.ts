/** tfjs's `tf.train.adam`. State: m, v. */
import { defineOptimizer, type ResolvedOptimizer } from '../optimizer-definition.js';
import { BETA1, BETA2, EPSILON } from './common.js';

const options = { beta1: BETA1, beta2: BETA2, epsilon: EPSILON } as const;
export type AdamConfig = ResolvedOptimizer<'adam', typeof options>;

/** Adam's bias corrections at `step` (from 1), as tfjs computes them: 1 - fround(beta^step). */
export function adamBiasCorrections(config: { beta1: number; beta2: number }, step: number): [number, number] {
  return [1 - Math.fround(Math.pow(config.beta1, step)), 1 - Math.fround(Math.pow(config.beta2, step))];
}

export const adam = defineOptimizer({
  name: 'adam',
  kind: 'adam',
  options,
  defaultLr: 0.001,
  stateSlots: () => 2,
  tfjsStateNames: ['m', 'v'],
  init: () => [0, 0],
  update(config, params, grads, state, start, end, step) {
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
  },
  nativeUpdate(addon, config, params, grads, state, start, end, step) {
    const [c1, c2] = adamBiasCorrections(config, step);
    const { lr, beta1, beta2, epsilon } = config;
    addon.adamUpdate(params, grads, state[0], state[1], start, end, lr, beta1, beta2, epsilon, c1, c2);
  },
  tfjs: (tf, o) => tf.train.adam(o.lr, o.beta1, o.beta2, o.epsilon),
});
