/**
 * A tfjs optimizer's state as its `getWeights()` lists it (the iterations, then each slot's array per variable), read
 * and written. tfjs's Adamax keeps the same state but implements neither `getWeights()` nor `setWeights()` ("not
 * implemented yet"): its fields (tfjs-core 4.22's `AdamaxOptimizer`: the moments, the weighted infinity norms, the
 * iteration and beta1's running power) are read and written here in that list's form, so that `fit` carries it on as
 * `model.fit` does. `test/fit-optimizer-state.test.ts` checks both ways against model.fit.
 */
import * as tf from '#tfjs';
import { adamaxAccBeta1 } from './optimizers/adamax.js';
import type { NamedValues } from './optimizer-weights.js';

/** One array of an optimizer's state, as tfjs's `getWeights()` gives it. */
export type NamedTensor = Awaited<ReturnType<tf.Optimizer['getWeights']>>[number];

type StateVariable = { originalName: string; variable: tf.Variable };

/** tfjs-core's AdamaxOptimizer's own fields. */
interface AdamaxFields {
  accumulatedFirstMoment: StateVariable[];
  accumulatedWeightedInfNorm: StateVariable[];
  iteration: tf.Variable;
  accBeta1: tf.Variable;
  beta1: number;
  iterations_: number;
}

const isAdamax = (o: tf.Optimizer) => o.getClassName() === 'Adamax';

/** `optimizer`'s state (its first entry a scalar made for the caller to dispose), or undefined: it cannot say. */
export async function tfjsOptimizerState(optimizer: tf.Optimizer): Promise<NamedTensor[] | undefined> {
  if (isAdamax(optimizer)) {
    const o = optimizer as unknown as AdamaxFields;
    const named = (s: StateVariable): NamedTensor => ({ name: s.originalName, tensor: s.variable });
    return [
      { name: 'iter', tensor: tf.scalar(optimizer.iterations, 'int32') },
      ...o.accumulatedFirstMoment.map(named),
      ...o.accumulatedWeightedInfNorm.map(named),
    ];
  }
  try {
    return await optimizer.getWeights();
  } catch {
    return undefined; // a class of another package that cannot give its state
  }
}

/** Sets `optimizer`'s state to `list` (in tfjs's order; the caller disposes it: variables are made of it). */
export async function setTfjsOptimizerState(optimizer: tf.Optimizer, list: NamedTensor[]): Promise<void> {
  if (!isAdamax(optimizer)) return optimizer.setWeights(list);
  const o = optimizer as unknown as AdamaxFields;
  const iterations = list[0].tensor.dataSync()[0];
  const rest = list.slice(1);
  const half = rest.length / 2;
  const made = (s: NamedTensor): StateVariable => ({ originalName: s.name, variable: s.tensor.variable(false) });
  o.accumulatedFirstMoment = rest.slice(0, half).map(made);
  o.accumulatedWeightedInfNorm = rest.slice(half).map(made);
  tf.tidy(() => {
    o.iteration.assign(tf.scalar(iterations));
    o.accBeta1.assign(tf.scalar(adamaxAccBeta1(o.beta1, iterations + 1))); // beta1's power at the next update
  });
  o.iterations_ = iterations;
}

/** A saved optimizer state (model.json's weights of group 'optimizer', decoded) into `optimizer`. */
export async function seedTfjsOptimizer(optimizer: tf.Optimizer, saved: readonly NamedValues[]): Promise<void> {
  const list = saved.map(s => ({
    name: s.name,
    tensor: tf.tensor(s.values, s.shape, s.values instanceof Int32Array ? 'int32' : 'float32'),
  }));
  try {
    await setTfjsOptimizerState(optimizer, list);
  } finally {
    tf.dispose(list.map(n => n.tensor));
  }
}
