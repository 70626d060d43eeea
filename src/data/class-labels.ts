/**
 * A label as a classifier reads it: an integer class in [0, classes). A float
 * (a regression target) or a class past the dataset's count is named with the
 * way out, on the main thread (sample 0, before any thread) and in the loaders.
 */

/** Why `label` is not a class of a dataset with `classes` classes, as a clause (`outside [0, 3)`); undefined when it is one. */
export function classLabelProblem(label: number, classes: number): string | undefined {
  if (Number.isInteger(label) && label >= 0 && label < classes) return undefined;
  if (Number.isFinite(label) && !Number.isInteger(label)) {
    return `not a class (labels are integers in [0, ${classes})); for a regression on float targets give loss 'mse' (--loss mse)`;
  }
  return `outside [0, ${classes})`;
}

/** Why a classifier cannot train on a dataset of `classes` classes; undefined when it can. */
export function singleClassProblem(classes: number): string | undefined {
  if (classes !== 1) return undefined;
  return 'cross-entropy over a single class is 0 whatever the weights, so nothing would train; for a regression on the float targets read returns, ' +
    "give loss 'mse' (--loss mse); for a classifier, give the dataset 2 or more classes";
}
