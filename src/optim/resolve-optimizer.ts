/**
 * A train config's optimizer fields -> the `OptimizerConfig` every thread receives: the name checked, the
 * optimizer's own defaults filled in, each of its hyper-parameters checked as it declares, and one that the chosen
 * optimizer does not have refused (naming the optimizers that have it). Generic over the registry: an optimizer's
 * file declares all of it.
 */
import { bad, finite, oneOf, shown } from '../config-checks.js';
import type { HyperOption, HyperValue } from './optimizer-definition.js';
import type { OptimizerConfig, OptimizerName } from './flat-optimizer.js';
import { getOptimizer, hyperParameterOwners, optimizerNames, type AnyOptimizer } from './optimizer-registry.js';
import type { BUILTIN_OPTIMIZERS } from './optimizers/index.js';

type Builtin = (typeof BUILTIN_OPTIMIZERS)[number];
type UnionToIntersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;
type HyperTable = UnionToIntersection<Builtin['options']>;

/** The optimizer fields of a TrainConfig: the name, lr and every built-in optimizer's hyper-parameters. */
export type OptimizerFields = { optimizer?: OptimizerName; lr?: number } & {
  -readonly [K in keyof HyperTable]?: HyperTable[K] extends HyperOption<infer T>
    ? T extends boolean
      ? boolean
      : number
    : never;
};

/** Every hyper-parameter key of the registered optimizers, in registry order. */
export function hyperFields(): string[] {
  return [...hyperParameterOwners().keys()];
}

/** Every optimizer field of a train config, the name and lr included (plugins' optimizers' too, once loaded). */
export function optimizerKeys(): ReadonlySet<string> {
  return new Set(['optimizer', 'lr', ...hyperFields()]);
}

/** Refuses a hyper-parameter the optimizer does not have (an `inert` value, momentum 0, is accepted everywhere). */
function refuseForeignFields(optimizer: AnyOptimizer, config: Record<string, unknown>): void {
  const own = Object.keys(optimizer.options);
  for (const [field, owners] of hyperParameterOwners()) {
    if (own.includes(field) || config[field] === undefined) continue;
    if (owners.some(o => o.options[field].inert !== undefined && o.options[field].inert === config[field])) continue;
    const names = owners.map(o => o.name);
    const hint = optimizer.foreignHints?.[field] === undefined ? '' : ` (${optimizer.foreignHints[field]})`;
    bad(
      field,
      `applies to ${names.join(', ')} only, not ${optimizer.name}, which takes ${['lr', ...own].join(', ')}${hint}; ` +
        (`remove ${field}, or choose ` +
          `${names.length === 1 ? `optimizer ${names[0]}` : `an optimizer of ${names.join(', ')}`}`),
    );
  }
}

/** One declared hyper-parameter, given or its fallback, checked. */
function hyperValue(field: string, option: HyperOption<HyperValue>, given: unknown): HyperValue {
  const value = given ?? option.fallback;
  if (option.kind === 'boolean') {
    if (typeof value !== 'boolean') bad(field, `must be true or false, got ${shown(value)}`);
    return value;
  }
  const range = option.range ?? { min: -Infinity, max: Infinity };
  return finite(field, value, range.min, range.max, range.maxOpen === true);
}

/** Resolves the optimizer of a train config, its defaults filled in. */
export function resolveOptimizer(config: OptimizerFields): OptimizerConfig {
  const name = config.optimizer ?? 'sgd';
  oneOf('optimizer', name, optimizerNames());
  const optimizer = getOptimizer(name);
  const given = config as Record<string, unknown>;
  refuseForeignFields(optimizer, given);
  const resolved: Record<string, unknown> = {
    kind: optimizer.kind,
    lr: finite('lr', config.lr ?? optimizer.defaultLr, 0, 10),
  };
  for (const [field, option] of Object.entries(optimizer.options)) {
    const value = hyperValue(field, option, given[field]);
    if (!(option.omitAtFallback && value === option.fallback)) resolved[field] = value;
  }
  optimizer.check?.(resolved as never);
  return resolved as OptimizerConfig;
}
