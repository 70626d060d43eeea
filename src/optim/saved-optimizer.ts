/**
 * The optimizer a saved model.json was compiled with, as train options: tfjs
 * writes `trainingConfig.optimizer_config` ({ class_name, config }) when a
 * compiled model is saved with `includeOptimizer: true`, and the keras
 * converter writes keras's. A run that names no optimizer trains with it, as
 * `model.fit` would after `tf.loadLayersModel` (the loss is read the same
 * way); the run's own hyper-parameters override the saved ones. Its saved
 * optimizer *state* (the weights of group 'optimizer') is read by
 * config/saved-model.ts.
 *
 * @example
 * savedOptimizerFields({ class_name: 'Adam', config: { learningRate: 0.01, beta1: 0.8, beta2: 0.999, epsilon: 1e-7 } })
 * // { optimizer: 'adam', lr: 0.01, beta1: 0.8, beta2: 0.999, epsilon: 1e-7 }
 */
import type { OptimizerFields } from './resolve-optimizer.js';
import { getOptimizer, hyperParameterOwners, optimizerNames, type AnyOptimizer } from './optimizer-registry.js';

/** tfjs's class names (`getClassName()`) and keras's, lower-cased: the registered optimizers' names. */
function optimizerNamed(className: string): AnyOptimizer | undefined {
  const name = optimizerNames().find(n => n.toLowerCase() === className.toLowerCase());
  return name === undefined ? undefined : getOptimizer(name);
}

/**
 * A saved config key (tfjs camelCase, keras snake_case; lower-cased, underscores dropped) to the train option it
 * sets: the learning rate, and each hyper-parameter by its key and its `savedKeys`.
 */
function savedFieldTable(): Record<string, string> {
  const fields: Record<string, string> = { learningrate: 'lr', lr: 'lr' };
  for (const [field, owners] of hyperParameterOwners()) {
    fields[field.toLowerCase()] = field;
    for (const o of owners) for (const key of o.options[field].savedKeys ?? []) fields[key] = field;
  }
  return fields;
}

/** Keys that carry nothing tandem applies when at these values (keras writes them for every optimizer). */
const INERT: Record<string, unknown[]> = {
  name: [],
  amsgrad: [false],
  decay: [0],
  clipnorm: [null],
  clipvalue: [null],
  globalclipnorm: [null],
  useema: [false],
  emamomentum: [],
  emaoverwritefrequency: [],
  jitcompile: [],
  islegacyoptimizer: [],
  weightdecay: [null, 0],
};

/** `table[key]` when the table itself has it (a saved key `constructor` is no field: the file is data). */
const own = <T>(table: Record<string, T>, key: string): T | undefined =>
  Object.hasOwn(table, key) ? table[key] : undefined;

/** What cannot be carried over, said by the caller with the file's name. */
export class SavedOptimizerProblem extends Error {}

/**
 * The train options of `optimizerConfig` (a model.json's `trainingConfig.optimizer_config`), or undefined when there is
 * none; throws SavedOptimizerProblem for an optimizer or a setting tandem does not train with.
 */
export function savedOptimizerFields(optimizerConfig: unknown): OptimizerFields | undefined {
  if (optimizerConfig === undefined || optimizerConfig === null) return undefined;
  const { class_name: className, config } = optimizerConfig as { class_name?: unknown; config?: unknown };
  const optimizer = typeof className === 'string' ? optimizerNamed(className) : undefined;
  if (!optimizer)
    throw new SavedOptimizerProblem(
      `optimizer ${JSON.stringify(className)}, which tandem does not train with (it trains with ` +
        `${optimizerNames().join(', ')})`,
    );
  const name = optimizer.name;
  const FIELDS = savedFieldTable();
  const fields: Record<string, unknown> = { optimizer: name };
  const settings = typeof config === 'object' && config !== null ? Object.entries(config) : [];
  // keras's RMSprop calls its mean-square decay rho (and its decay is the legacy learning-rate decay); tfjs's calls it
  // decay.
  const kerasRmsprop = name === 'rmsprop' && settings.some(([key]) => key.toLowerCase() === 'rho');
  for (const [key, value] of settings) {
    const plain = key.toLowerCase().replaceAll('_', '');
    const field = kerasRmsprop
      ? plain === 'rho'
        ? 'decay'
        : plain === 'decay'
          ? undefined
          : own(FIELDS, plain)
      : // adamax (and tfjs's rmsprop) have a decay of their own; keras's legacy learning-rate decay elsewhere
        // must be 0.
        plain === 'decay' && !('decay' in optimizer.options)
        ? undefined
        : own(FIELDS, plain);
    if (value === null || value === undefined) continue;
    if (field) {
      fields[field] = value;
    } else if (!Object.hasOwn(INERT, plain) || (INERT[plain].length > 0 && !INERT[plain].includes(value))) {
      throw new SavedOptimizerProblem(`${className} with ${key} ${JSON.stringify(value)}, which tandem does not apply`);
    }
  }
  // tfjs's SGD is plain (no momentum), where tandem's sgd defaults to momentum 0.9.
  for (const [field, value] of Object.entries(optimizer.savedFallbacks ?? {})) fields[field] ??= value;
  return fields as OptimizerFields;
}
