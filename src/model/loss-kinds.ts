/**
 * The losses tandem trains, by name: the two classification losses and the
 * regression losses (one output, float targets). A leaf: the config types, the
 * loss itself and the data checks all name them.
 */
/**
 * The regression losses: one output against one float target per sample, each the per-sample mean tfjs-layers'
 * loss of that name gives (`huber`: tfjs-core's `tf.losses.huberLoss`, delta 1; tfjs-layers has no huber).
 */
export const REGRESSION_LOSS_KINDS = ['mse', 'mae', 'huber', 'logcosh', 'msle', 'mape', 'poisson'] as const;
export type RegressionLossKind = (typeof REGRESSION_LOSS_KINDS)[number];
export const LOSS_KINDS = ['categorical', 'binary', ...REGRESSION_LOSS_KINDS] as const;
export type LossKind = (typeof LOSS_KINDS)[number];

/** Whether `kind` is a regression loss (float targets from a data module, one output, no accuracy). */
export function isRegressionLoss(kind: LossKind | undefined): kind is RegressionLossKind {
  return (REGRESSION_LOSS_KINDS as readonly string[]).includes(kind as string);
}
