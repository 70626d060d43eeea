/**
 * Optimizers on flat Float32Arrays in shared memory, with exactly the update rules of tfjs's own `tf.train.*`, so
 * that an update can run on any thread (the comm side included) on a range of the parameters, and give what tfjs
 * gives. Each optimizer is one file under optimizers/ (its options, state and rule); these dispatch by kind.
 */
import type { HyperValue, OptimizerDefinition, ResolvedOptimizer } from './optimizer-definition.js';
import { optimizerOfKind } from './optimizer-registry.js';
import { BUILTIN_OPTIMIZERS } from './optimizers/index.js';
export { TFJS_EPSILON } from './optimizers/common.js';
export { adamBiasCorrections } from './optimizers/adam.js';

type ConfigOf<D> = D extends OptimizerDefinition<infer K, infer O> ? ResolvedOptimizer<K, O> : never;

/**
 * What every thread receives: a built-in optimizer's resolved config, narrowed by `kind`. A plugin's optimizer
 * travels the same way (`PluginOptimizerConfig`, its own definition types it); it is kept out of this union so that
 * `kind` still narrows the built-in ones.
 */
export type OptimizerConfig = ConfigOf<(typeof BUILTIN_OPTIMIZERS)[number]>;
export type PluginOptimizerConfig = { kind: string; lr: number; [hyper: string]: HyperValue | string };

export type OptimizerKind = OptimizerConfig['kind'];

/** The built-in names a user may give: every kind, and `momentum` (tfjs's `tf.train.momentum`: sgd with momentum). */
export const OPTIMIZERS = BUILTIN_OPTIMIZERS.map(o => o.name) as readonly (typeof BUILTIN_OPTIMIZERS)[number]['name'][];
export type OptimizerName = (typeof BUILTIN_OPTIMIZERS)[number]['name'] | (string & {});

/** How many floats of state the optimizer keeps per parameter (each optimizer's file says which, in order). */
export function optimizerStateSlots(config: OptimizerConfig): number {
  return optimizerOfKind(config.kind).stateSlots(config as never);
}

/** Each state slot's value before the first step: 0, but adagrad's accumulator starts at its initial value. */
export function initialOptimizerState(config: OptimizerConfig): number[] {
  return optimizerOfKind(config.kind).init(config as never);
}

/** Sets freshly allocated state slots to their values before the first step (`initialOptimizerState`). */
export function fillInitialOptimizerState(config: OptimizerConfig, state: Float32Array[]): void {
  initialOptimizerState(config).forEach((v, j) => {
    if (v !== 0) state[j].fill(v);
  });
}

/**
 * Applies one update to params[start, end) from grads[start, end).
 * `state` holds `optimizerStateSlots` arrays as long as params; `step` counts from 1.
 */
export function applyUpdate(
  config: OptimizerConfig,
  params: Float32Array,
  grads: Float32Array,
  state: Float32Array[],
  start: number,
  end: number,
  step: number,
): void {
  optimizerOfKind(config.kind).update(config as never, params, grads, state, start, end, optimizerStep(config, step));
}

/** The step an optimizer's rule sees at the run's `step`: counted on from the updates it made before the run. */
export function optimizerStep(config: { stepsBefore?: number }, step: number): number {
  return step + (config.stepsBefore ?? 0);
}
