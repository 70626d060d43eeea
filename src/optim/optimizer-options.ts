/**
 * The optimizer section of a train config, as option declarations generated from the registry: `optimizer`, `lr`,
 * and each hyper-parameter once, its doc and default gathered from every optimizer that declares it. The flags keep
 * their spelling (`--initial-accumulator` sets `initialAccumulatorValue`). The checks against the chosen optimizer
 * run in resolveOptimizer.
 */
import type { OptionDeclaration } from '../options/declaration.js';
import type { AnyOptimizer } from './optimizer-registry.js';
import { getOptimizer, hyperParameterOwners, optimizerNames } from './optimizer-registry.js';
import type { OptimizerFields } from './resolve-optimizer.js';

export type { OptimizerFields } from './resolve-optimizer.js';

export type OptimizerOptionTable = { readonly [key: string]: OptionDeclaration<unknown> };

/** `sgd, momentum: the momentum (0: plain sgd); rmsprop: the momentum`: each doc once, with who declares it. */
function gathered(field: string, owners: AnyOptimizer[], part: (o: AnyOptimizer) => string): string {
  const byText = new Map<string, string[]>();
  for (const o of owners) byText.set(part(o), [...(byText.get(part(o)) ?? []), o.name]);
  if (byText.size === 1 && owners.length === optimizerNames().length) return [...byText.keys()][0];
  return [...byText].map(([text, names]) => `${names.join(', ')}: ${text}`).join('; ');
}

/** One hyper-parameter's declaration; declarations of one key must agree on its kind and flag. */
function hyperDeclaration(field: string, owners: AnyOptimizer[]): OptionDeclaration<unknown> {
  const first = owners[0].options[field];
  for (const o of owners) {
    const option = o.options[field];
    if (option.kind !== first.kind || option.flag !== first.flag)
      throw new Error(`optimizer ${o.name} declares ${field} unlike ${owners[0].name} (kind or flag differ)`);
  }
  const declaration: OptionDeclaration<unknown> = {
    kind: first.kind,
    group: 'optimizer',
    hosts: 'same', // in the update rule: a host with another value updates its replicas otherwise
    doc: gathered(field, owners, o => o.options[field].doc),
    ...(first.flag === undefined ? {} : { flag: first.flag }),
  };
  return first.kind === 'boolean'
    ? declaration
    : { ...declaration, default: gathered(field, owners, o => String(o.options[field].fallback)) };
}

/** Every optimizer option of the registered optimizers (plugins' too, once loaded). */
export function optimizerOptionTable(): OptimizerOptionTable {
  const names = optimizerNames();
  const lrs = names.map(n => `${n} ${getOptimizer(n).defaultLr}`).join(', ');
  const table: Record<string, OptionDeclaration<unknown>> = {
    optimizer: {
      kind: 'string',
      group: 'optimizer',
      hosts: 'same',
      choices: names,
      default: "a saved model's compiled optimizer, else sgd",
      doc: "tfjs's optimizers (momentum: sgd with momentum); each takes only its own hyper-parameters",
    },
    lr: { kind: 'real', group: 'optimizer', hosts: 'same', doc: 'learning rate', default: lrs },
  };
  for (const [field, owners] of hyperParameterOwners()) table[field] = hyperDeclaration(field, owners);
  return table;
}

/** The built-in optimizers' options (`optimizerOptionTable()` after plugins load for theirs). */
export const OPTIMIZER_OPTIONS: { readonly [K in keyof Required<OptimizerFields>]-?: OptionDeclaration<unknown> } =
  optimizerOptionTable() as { readonly [K in keyof Required<OptimizerFields>]-?: OptionDeclaration<unknown> };
