/**
 * tfjs's `classWeight` (`{ [classId]: weight }`, a one-element array of it, or `{ [outputName]: it }`) as the weight
 * per class id tandem's devices multiply each sample's loss by; checked as tfjs checks it: every class in the
 * training labels must have a weight.
 */
import type * as tf from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import { isRegressionLoss } from '../model/loss-kinds.js';
import type { FitTargets, FitY } from './fit-targets.js';

type Given = tf.ModelFitArgs['classWeight'];

/** One weight per class id (classes without a weight, absent from the labels: 1, never used); undefined: none. */
export function classWeightOf(given: Given, model: tf.LayersModel, targets: FitTargets, y: FitY): number[] | undefined {
  if (given === undefined || given === null) return undefined;
  if (isRegressionLoss(targets.loss))
    throw new TandemError('BAD_CONFIG', `fit: classWeight weighs classes, and loss '${targets.loss}' is a regression`);
  if (y.targetShape)
    throw new TandemError(
      'BAD_CONFIG',
      `fit: classWeight weighs one class label per sample, and y gives targets of shape ` +
        `[${y.targetShape.join(', ')}] ` +
        'per sample; tandem weighs those not yet: leave classWeight out, or give one label per sample',
    );
  const labels = y.values;
  const table = oneTable(given, model.outputNames[0]);
  const weights = Array.from({ length: targets.classes }, (_, c) => table[c] ?? 1);
  for (const label of new Set(labels)) {
    const w = table[label];
    if (w === undefined || w === null)
      throw new TandemError(
        'BAD_CONFIG',
        `fit: classWeight must contain all classes in the training data; class ${label} is in the data but not ` +
          'in classWeight (tfjs refuses it too)',
      );
    if (typeof w !== 'number' || !Number.isFinite(w) || w < 0)
      throw new TandemError('BAD_CONFIG', `fit: classWeight[${label}] is ${String(w)}; give a finite weight ≥ 0`);
  }
  return weights;
}

/** The one output's `{ [classId]: weight }` of tfjs's forms. */
function oneTable(given: NonNullable<Given>, outputName: string): Record<number, number | undefined> {
  if (Array.isArray(given)) {
    if (given.length !== 1)
      throw new TandemError('BAD_CONFIG', `fit: classWeight has ${given.length} tables for a model of one output`);
    return given[0];
  }
  const byName = (given as Record<string, unknown>)[outputName];
  return typeof byName === 'object' && byName !== null ? (byName as Record<number, number>) : (given as tf.ClassWeight);
}
