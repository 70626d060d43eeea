/**
 * An optimizer's state as tfjs hands it over: `optimizer.getWeights()`, and the weights of group 'optimizer' that
 * `model.save({ includeOptimizer: true })` writes. Its iterations come first (a scalar), then, for each state slot in
 * the optimizer's order, one array per trainable weight in the order the optimizer first saw them (the model's
 * `trainableWeights`). tandem keeps the same state in flat slots (optimizer-definition.ts's `tfjsStateNames` names
 * them as tfjs does); these convert one into the other, by position, checked against the model's weights.
 * Adam's list on a model of two trainable weights is [iter, w0/m, w1/m, w0/v, w1/v], and its OptimizerWeights
 * { iterations, slots: [[w0/m, w1/m], [w0/v, w1/v]] }.
 */
import type { OptimizerConfig } from './flat-optimizer.js';
import { optimizerStateSlots } from './flat-optimizer.js';
import { optimizerOfKind } from './optimizer-registry.js';

/** One array of state: its name (tfjs's `<weight>/<slot>`), shape and values. */
export interface NamedValues {
  name: string;
  shape: number[];
  values: Float32Array | Int32Array;
}

/** An optimizer's state in the model's terms. */
export interface OptimizerWeights {
  /** The updates it has made (tfjs's `iterations`). */
  iterations: number;
  /** slots[j][i]: state slot j of trainable weight i (model order); none: none kept yet (a fresh tfjs optimizer). */
  slots: NamedValues[][];
}

/** What a list of optimizer weights does not fit; the caller says whose list it is. */
export class OptimizerWeightsProblem extends Error {}

const problem = (message: string): never => {
  throw new OptimizerWeightsProblem(message);
};

/** The suffixes tfjs names `config`'s state slots with; refuses an optimizer that does not declare them. */
export function stateNamesOf(config: OptimizerConfig): string[] {
  const names = optimizerOfKind(config.kind).tfjsStateNames;
  const slots = optimizerStateSlots(config);
  if (!names || names.length < slots)
    return problem(`optimizer ${config.kind} does not say how tfjs names its state (its tfjsStateNames)`);
  return names.slice(0, slots);
}

/** The iterations of tfjs's list: its first weight, a whole number of shape []. */
export function iterationsOf(list: readonly NamedValues[]): number {
  const [first] = list;
  if (!first) return problem('it holds no weight, where the first is the iterations');
  const iterations = first.values[0];
  if (first.shape.length !== 0 || !Number.isSafeInteger(iterations) || iterations < 0)
    problem(`its first weight, ${first.name}, is not the iterations: a whole number >= 0 of shape []`);
  return iterations;
}

/**
 * What of tfjs's list can be checked before the model is built: its iterations, and a count of state arrays that
 * `config`'s slots divide (each slot has one array per trainable weight); a rule of no slots keeps none of them.
 */
export function checkedIterations(config: OptimizerConfig, list: readonly NamedValues[]): number {
  const iterations = iterationsOf(list);
  const arrays = list.length - 1;
  if (arrays === 0) return iterations;
  const names = stateNamesOf(config);
  if (names.length > 0 && arrays % names.length !== 0)
    problem(
      `it holds ${arrays} state arrays after its iterations, which ${config.kind}'s ${names.length} slots ` +
        `(${names.join(', ') || 'none'}), one array per trainable weight each, do not divide`,
    );
  return iterations;
}

/** tfjs's list (iterations first) as `config`'s state of `weights` (model order), each array's shape checked. */
export function optimizerWeightsOf(
  config: OptimizerConfig,
  weights: readonly { name: string; shape: number[] }[],
  list: readonly NamedValues[],
): OptimizerWeights {
  const iterations = iterationsOf(list);
  const rest = list.slice(1);
  if (rest.length === 0) return { iterations, slots: [] };
  const names = stateNamesOf(config);
  // a rule that keeps no state: tfjs's momentum optimizer at momentum 0 saves an accumulator it never reads again
  if (names.length === 0) return { iterations, slots: [] };
  const expected = names.length * weights.length;
  if (rest.length !== expected)
    problem(
      `it holds ${rest.length} state arrays after its iterations, and ${config.kind} keeps ${names.length} ` +
        `(${names.join(', ') || 'none'}) for each of the model's ${weights.length} trainable weights: ${expected}`,
    );
  const slots = names.map((slot, j) =>
    weights.map((w, i) => {
      const got = rest[j * weights.length + i];
      if (got.shape.join() !== w.shape.join())
        problem(
          `its ${slot} of trainable weight ${i} (${w.name} [${w.shape.join(', ')}]), ${got.name}, has shape ` +
            `[${got.shape.join(', ')}]`,
        );
      const at = got.values.findIndex(v => !Number.isFinite(v));
      if (at >= 0) problem(`its ${got.name} holds ${got.values[at]} at element ${at}`);
      return got;
    }),
  );
  return { iterations, slots };
}
