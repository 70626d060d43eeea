/**
 * A label as a classifier reads it: an integer class in [0, classes). A float
 * (a regression target) or a class past the dataset's count is named with the
 * way out, on the main thread (sample 0, before any thread) and in the loaders.
 */
import { TandemError } from '../errors.js';
import { found, nonNumberLabelProblem } from './returned-value.js';
import { REGRESSION_LOSS_KINDS } from '../model/loss-kinds.js';

/** The way to a regression loss, as a clause: `'mse' (--loss mse) or another regression loss (mae, huber, ...)`. */
export const REGRESSION_LOSSES =
  `'mse' (--loss mse) or another regression loss ` + `(${REGRESSION_LOSS_KINDS.filter(k => k !== 'mse').join(', ')})`;

/**
 * Why `label` is not a class of a dataset with `classes` classes, as a clause (`outside [0, 3)`); undefined when it is
 * one.
 */
export function classLabelProblem(label: unknown, classes: number): string | undefined {
  if (typeof label !== 'number') return nonNumberLabelProblem(label);
  if (Number.isInteger(label) && label >= 0 && label < classes) return undefined;
  if (Number.isFinite(label) && !Number.isInteger(label)) {
    return (
      `not a class (labels are integers in [0, ${classes})); for a regression on float targets give loss ` +
      `${REGRESSION_LOSSES}`
    );
  }
  return `outside [0, ${classes})`;
}

/** Why a classifier cannot train on a dataset of `classes` classes; undefined when it can. */
export function singleClassProblem(classes: number): string | undefined {
  if (classes !== 1) return undefined;
  return (
    'cross-entropy over a single class is 0 whatever the weights, so nothing would train; for a regression on the ' +
    'float targets read returns, ' +
    `give loss ${REGRESSION_LOSSES}; for a classifier, give the dataset 2 or more classes`
  );
}

/**
 * `label` of sample `index` of dataset `source` (a path), when it is a class: else BAD_DATA naming the sample, the
 * label and the fix.
 */
export function checkedClassLabel(label: unknown, classes: number, source: string, index: number): number {
  const problem = classLabelProblem(label, classes);
  if (problem)
    throw new TandemError('BAD_DATA', `dataset ${source}: sample ${index} has label ${found(label)}, ${problem}`);
  return label as number;
}
