/**
 * tfjs's `classWeight` (`{ [classId]: weight }`, a one-element array of it, or `{ [outputName]: it }`) as the weight
 * per class id tandem's devices multiply each sample's loss by; checked as tfjs checks it: every class in the
 * training labels must have a weight.
 */
import type * as tf from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import { isRegressionLoss, type LossKind } from '../model/loss-kinds.js';
import type { FitTargets, FitY } from './fit-targets.js';

type Given = tf.ModelFitArgs['classWeight'];

/** One weight per class id (classes without a weight, absent from the labels: 1, never used); undefined: none. */
export function classWeightOf(given: Given, model: tf.LayersModel, targets: FitTargets, y: FitY): number[] | undefined {
  if (given === undefined || given === null) return undefined;
  if (isRegressionLoss(targets.loss))
    throw new TandemError('BAD_CONFIG', `fit: classWeight weighs classes, and loss '${targets.loss}' is a regression`);
  if (y.targetShape) throw targetsWeighed(y.targetShape, targets);
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

/**
 * classWeight refused on targets sent as a tensor per sample. Labels (class ids, one-hot rows) travel so too when
 * compile's metrics other than the loss's accuracy need y as tfjs has it: then those metrics are the culprit.
 */
function targetsWeighed(shape: number[], targets: FitTargets): TandemError {
  const labels =
    shape.length === 1 && (shape[0] === 1 || (targets.loss === 'categorical' && shape[0] === targets.classes));
  const because =
    targets.metrics && labels
      ? `; labels travel so because metrics ${targets.metricKeys.map(k => `'${k}'`).join(', ')} are computed on y as ` +
        "tfjs has it: compile with metrics ['acc'] (or none) to weigh classes, or leave classWeight out"
      : ': leave classWeight out, or give one label per sample';
  return new TandemError(
    'BAD_CONFIG',
    `fit: classWeight weighs one class label per sample, and y goes to the devices as targets of shape ` +
      `[${shape.join(', ')}] per sample; tandem weighs those not yet${because}`,
  );
}

/**
 * A model of several outputs: each output's weight per class id (null: none), from tfjs's forms — an array of one
 * table (or null) per output, or `{ outputName: table }` — checked as tfjs checks them: every class an output's
 * targets hold (class ids, the argmax of one-hot rows, or a [n, 1] column) must have a weight. A table on an output
 * of a regression loss is refused (its targets are not classes).
 */
export function outputClassWeights(
  given: Given,
  model: tf.LayersModel,
  ys: tf.Tensor[],
  kinds: LossKind[],
): (number[] | null)[] | undefined {
  if (given === undefined || given === null) return undefined;
  const names = model.outputNames;
  return tablesOf(given, names).map((table, i) => {
    if (!table) return null;
    if (isRegressionLoss(kinds[i]))
      throw new TandemError(
        'BAD_CONFIG',
        `fit: classWeight has a table for output ${names[i]}, whose loss is a regression ('${kinds[i]}'); weigh ` +
          'classifier outputs only (classWeight: { outputName: table } for those)',
      );
    const labels = classIdsOf(ys[i], names[i]);
    for (const label of new Set(labels)) {
      const w = table[label];
      if (w === undefined || w === null)
        throw new TandemError(
          'BAD_CONFIG',
          `fit: classWeight for output ${names[i]} must contain all classes in its training targets; class ` +
            `${label} is in them but not in classWeight (tfjs refuses it too)`,
        );
      if (typeof w !== 'number' || !Number.isFinite(w) || w < 0)
        throw new TandemError(
          'BAD_CONFIG',
          `fit: classWeight.${names[i]}[${label}] is ${String(w)}; give a weight ≥ 0`,
        );
    }
    const size = Math.max(0, ...labels, ...Object.keys(table).map(Number).filter(Number.isInteger)) + 1;
    return Array.from({ length: size }, (_, c) => table[c] ?? 1);
  });
}

/** Per output, its `{ [classId]: weight }` or null, from an array (one per output) or a map by output name. */
function tablesOf(given: NonNullable<Given>, names: string[]): (Record<number, number | undefined> | null)[] {
  if (Array.isArray(given)) {
    if (given.length !== names.length)
      throw new TandemError(
        'BAD_CONFIG',
        `fit: classWeight is an array of ${given.length} table(s), and the model has ${names.length} outputs ` +
          `(${names.join(', ')}): give one per output (null for none) or { outputName: table }`,
      );
    return given.map(t => t ?? null);
  }
  const map = given as Record<string, unknown>;
  if (names.length === 1 && Object.keys(map).every(k => /^\d+$/.test(k)))
    return [map as Record<number, number | undefined>]; // one output's table (a function loss: fit-outputs.ts)
  const unknown = Object.keys(map).filter(k => !names.includes(k));
  if (unknown.length > 0)
    throw new TandemError(
      'BAD_CONFIG',
      `fit: classWeight names ${unknown.join(', ')}, not an output of the model (${names.join(', ')}); give ` +
        '{ outputName: { classId: weight } }',
    );
  return names.map(n => (map[n] as Record<number, number> | undefined) ?? null);
}

/** An output's class id per sample, as tfjs reads them for class weights: ids, a [n, 1] column, or one-hot rows. */
function classIdsOf(y: tf.Tensor, name: string): number[] {
  if (y.rank === 1 || (y.rank === 2 && y.shape[1] === 1)) return Array.from(y.dataSync());
  if (y.rank === 2) {
    const ids = y.argMax(1);
    const values = Array.from(ids.dataSync());
    ids.dispose();
    return values;
  }
  throw new TandemError(
    'BAD_CONFIG',
    `fit: classWeight weighs one class per sample, and output ${name}'s targets have shape [${y.shape.join(', ')}]`,
  );
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
