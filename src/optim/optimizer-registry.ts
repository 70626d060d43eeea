/**
 * The optimizers a run can train with: the built-in ones (optimizers/, one file each) and those a plugin registers
 * (`registerOptimizer`, in every thread: plugins load everywhere). A duplicate name is refused.
 */
import { TandemError } from '../errors.js';
import { NamedRegistry } from '../named-registry.js';
import { meant } from '../config-checks.js';
import type { HyperOption, HyperOptions, HyperValue, OptimizerDefinition } from './optimizer-definition.js';
import { BUILTIN_OPTIMIZERS } from './optimizers/index.js';

/** A registered optimizer, its types erased (each definition is typed from its own declarations). */
export type AnyOptimizer = OptimizerDefinition<string, Readonly<Record<string, HyperOption<HyperValue>>>>;

const registry = new NamedRegistry<AnyOptimizer>(
  'optimizer',
  BUILTIN_OPTIMIZERS as unknown as readonly AnyOptimizer[],
  (name, known) =>
    new TandemError(
      'BAD_CONFIG',
      `config.optimizer: must be one of ${known.join(', ')}, got ${JSON.stringify(name)}${meant(name, known)}`,
    ),
);

/** Adds an optimizer (a plugin's); its options become train options, flags and `--help` lines. */
export function registerOptimizer<K extends string, O extends HyperOptions>(
  definition: OptimizerDefinition<K, O>,
): void {
  registry.register(definition as unknown as AnyOptimizer);
}

export function optimizerNames(): string[] {
  return registry.names();
}

export function getOptimizer(name: string): AnyOptimizer {
  return registry.get(name);
}

/** The optimizer that updates configs of `kind` (`momentum` resolves to kind sgd). */
export function optimizerOfKind(kind: string): AnyOptimizer {
  const found =
    registry.find(kind) ??
    optimizerNames()
      .map(getOptimizer)
      .find(d => d.kind === kind);
  if (!found) throw new TandemError('BAD_CONFIG', `no optimizer updates configs of kind '${kind}'`);
  return found;
}

/** Every hyper-parameter key, in registry order, with the optimizers that declare it. */
export function hyperParameterOwners(): Map<string, AnyOptimizer[]> {
  const owners = new Map<string, AnyOptimizer[]>();
  for (const definition of optimizerNames().map(getOptimizer)) {
    for (const key of Object.keys(definition.options)) owners.set(key, [...(owners.get(key) ?? []), definition]);
  }
  return owners;
}
