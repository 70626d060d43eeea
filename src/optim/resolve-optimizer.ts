/**
 * A train config's optimizer fields -> the `OptimizerConfig` every thread
 * receives: the name checked, tfjs's defaults filled in, each hyper-parameter
 * checked, and one that the chosen optimizer does not have refused (naming
 * the optimizers that have it).
 */
import { bad, finite, oneOf } from '../config-checks.js';
import { OPTIMIZERS, TFJS_EPSILON, type OptimizerConfig, type OptimizerName } from './flat-optimizer.js';

/** The optimizer fields of a TrainConfig. */
export interface OptimizerFields {
  optimizer?: OptimizerName;
  lr?: number;
  momentum?: number;
  beta1?: number;
  beta2?: number;
  epsilon?: number;
  rho?: number;
  decay?: number;
  centered?: boolean;
  initialAccumulatorValue?: number;
  nesterov?: boolean;
}
type HyperField = Exclude<keyof OptimizerFields, 'optimizer' | 'lr'>;
const HYPER_FIELDS: readonly HyperField[] = [
  'momentum',
  'nesterov',
  'beta1',
  'beta2',
  'epsilon',
  'rho',
  'decay',
  'centered',
  'initialAccumulatorValue',
];
/** Every optimizer field of a train config, the name and lr included. */
export const OPTIMIZER_KEYS: ReadonlySet<string> = new Set(['optimizer', 'lr', ...HYPER_FIELDS]);

/** The hyper-parameters each optimizer has in tfjs (`tf.train.*`'s arguments after the learning rate). */
export const OPTIMIZER_FIELDS: Record<OptimizerName, readonly HyperField[]> = {
  sgd: ['momentum', 'nesterov'],
  momentum: ['momentum', 'nesterov'],
  adam: ['beta1', 'beta2', 'epsilon'],
  rmsprop: ['decay', 'momentum', 'epsilon', 'centered'],
  adagrad: ['initialAccumulatorValue'],
  adamax: ['beta1', 'beta2', 'epsilon', 'decay'],
  adadelta: ['rho', 'epsilon'],
};

/**
 * Default learning rates: tf.train's own defaults where it has one (adam 0.001, adamax 0.002, adadelta 0.001),
 * else what tfjs-layers compiles a string name to (rmsprop 0.001, adagrad 0.01, sgd 0.01).
 */
export const DEFAULT_LR: Record<OptimizerName, number> = {
  sgd: 0.01,
  momentum: 0.01,
  adam: 0.001,
  rmsprop: 0.001,
  adagrad: 0.01,
  adamax: 0.002,
  adadelta: 0.001,
};

/** Refuses a hyper-parameter the optimizer does not have (momentum 0 is accepted everywhere: it means none). */
function refuseForeignFields(name: OptimizerName, config: OptimizerFields): void {
  const own = OPTIMIZER_FIELDS[name];
  for (const field of HYPER_FIELDS) {
    if (own.includes(field) || config[field] === undefined || (field === 'momentum' && config.momentum === 0)) continue;
    const owners = OPTIMIZERS.filter(o => OPTIMIZER_FIELDS[o].includes(field));
    const hint =
      name === 'rmsprop' && field === 'rho' ? ` (keras's rho is rmsprop's decay here: set decay instead)` : '';
    bad(
      field,
      `applies to ${owners.join(', ')} only, not ${name}, which takes ${['lr', ...own].join(', ')}${hint}; ` +
        `remove ${field}, or choose ${owners.length === 1 ? `optimizer ${owners[0]}` : `an optimizer of ${owners.join(', ')}`}`,
    );
  }
}

/** Resolves the optimizer of a train config, tfjs's defaults filled in. */
export function resolveOptimizer(config: OptimizerFields): OptimizerConfig {
  const name = config.optimizer ?? 'sgd';
  oneOf('optimizer', name, OPTIMIZERS);
  refuseForeignFields(name, config);
  const lr = finite('lr', config.lr ?? DEFAULT_LR[name], 0, 10);
  const momentum = () => finite('momentum', config.momentum ?? (name === 'rmsprop' ? 0 : 0.9), 0, 0.9999);
  const beta = (field: 'beta1' | 'beta2', d: number) => finite(field, config[field] ?? d, 0, 1, true);
  const epsilon = () => finite('epsilon', config.epsilon ?? TFJS_EPSILON, Number.MIN_VALUE, 1);
  switch (name) {
    case 'sgd':
    case 'momentum': {
      const m = momentum();
      if (config.nesterov !== undefined && typeof config.nesterov !== 'boolean')
        bad('nesterov', `must be true or false, got ${JSON.stringify(config.nesterov)}`);
      if (config.nesterov && m === 0)
        bad(
          'nesterov',
          'needs momentum > 0 (Nesterov looks ahead along the momentum): give momentum, e.g. 0.9, or drop nesterov',
        );
      return config.nesterov ? { kind: 'sgd', lr, momentum: m, nesterov: true } : { kind: 'sgd', lr, momentum: m };
    }
    case 'adam':
      return { kind: 'adam', lr, beta1: beta('beta1', 0.9), beta2: beta('beta2', 0.999), epsilon: epsilon() };
    case 'rmsprop': {
      if (config.centered !== undefined && typeof config.centered !== 'boolean')
        bad('centered', `must be true or false, got ${JSON.stringify(config.centered)}`);
      return {
        kind: 'rmsprop',
        lr,
        decay: finite('decay', config.decay ?? 0.9, 0, 1, true),
        momentum: momentum(),
        epsilon: epsilon(),
        centered: config.centered ?? false,
      };
    }
    case 'adagrad':
      return {
        kind: 'adagrad',
        lr,
        initialAccumulatorValue: finite('initialAccumulatorValue', config.initialAccumulatorValue ?? 0.1, 0, 1e6),
      };
    case 'adamax':
      return {
        kind: 'adamax',
        lr,
        beta1: beta('beta1', 0.9),
        beta2: beta('beta2', 0.999),
        epsilon: epsilon(),
        decay: finite('decay', config.decay ?? 0, 0, 10),
      };
    case 'adadelta':
      return { kind: 'adadelta', lr, rho: finite('rho', config.rho ?? 0.95, 0, 1, true), epsilon: epsilon() };
    default: {
      const never: never = name;
      throw new Error(`unknown optimizer ${String(never)}`);
    }
  }
}
