/**
 * The optimizer section of a train config, as option declarations. The flags keep their spelling
 * (`--initial-accumulator` sets `initialAccumulatorValue`). Each optimizer's own hyper-parameters are
 * declared by that optimizer; the checks against the chosen optimizer run in resolveOptimizer.
 */
import type { OptionDeclaration } from '../options/declaration.js';
import { OPTIMIZERS } from './flat-optimizer.js';
import type { OptimizerFields } from './resolve-optimizer.js';

export type { OptimizerFields } from './resolve-optimizer.js';

const real = (doc: string, dflt?: string): OptionDeclaration<number> => ({
  kind: 'real',
  group: 'optimizer',
  doc,
  ...(dflt === undefined ? {} : { default: dflt }),
});

/** Every optimizer option: the name, the learning rate and every optimizer's hyper-parameters. */
export const OPTIMIZER_OPTIONS: { readonly [K in keyof Required<OptimizerFields>]-?: OptionDeclaration<unknown> } = {
  optimizer: {
    kind: 'string',
    group: 'optimizer',
    choices: OPTIMIZERS,
    default: "a saved model's compiled optimizer, else sgd",
    doc: "tfjs's optimizers (momentum: sgd with momentum); each takes only its own hyper-parameters",
  },
  lr: real(
    'learning rate',
    "tf.train's (adam 0.001, adamax 0.002, adadelta 0.001), else tfjs-layers' (0.01; rmsprop 0.001)",
  ),
  momentum: real('sgd/momentum, rmsprop: the momentum', '0.9 (rmsprop 0)'),
  nesterov: { kind: 'boolean', group: 'optimizer', doc: "sgd/momentum: Nesterov's look-ahead (needs momentum > 0)" },
  beta1: real('adam, adamax: decay of the first moment', '0.9'),
  beta2: real('adam, adamax: decay of the second moment', '0.999'),
  epsilon: real('adam, rmsprop, adamax, adadelta: added to the denominator', '1e-7'),
  rho: real('adadelta: decay of its accumulators', '0.95'),
  decay: real('rmsprop: decay of the mean square (keras rho); adamax: of the learning rate', '0.9 (adamax 0)'),
  centered: { kind: 'boolean', group: 'optimizer', doc: 'rmsprop: divide by the estimated variance' },
  initialAccumulatorValue: {
    ...real("adagrad: the accumulator's value before the first step", '0.1'),
    flag: 'initial-accumulator',
  },
};
