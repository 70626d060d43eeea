/**
 * Validation as tfjs's `model.fit` does it: `validationData`, or the last `validationSplit` of x and y (tfjs slices
 * at floor(n · (1 - split))); evaluated across the devices at the end of every epoch on the trained weights
 * (validation-pool.ts), in batches of the fit's batch size, logged as `val_<name>` of the model's `metricsNames`.
 */
import * as tf from '#tfjs';
import { TandemError } from '../errors.js';
import type { FitArgs } from './fit-args.js';

export interface Validation {
  x: tf.Tensor;
  y: tf.Tensor;
  /** Frees the tensors fit sliced (not the user's own validationData). */
  dispose(): void;
}

/** The training part of x, y and the validation samples, as tfjs splits them. */
export function splitValidation(
  x: tf.Tensor,
  y: tf.Tensor,
  args: FitArgs,
): { trainX: tf.Tensor; trainY: tf.Tensor; validation?: Validation } {
  if (args.validationData) {
    const [vx, vy, weights] = args.validationData;
    if (!(vx instanceof tf.Tensor) || !(vy instanceof tf.Tensor) || weights !== undefined)
      throw new TandemError('BAD_DATA', 'fit: validationData must be [x, y] of two tensors (no sample weights)');
    return { trainX: x, trainY: y, validation: { x: vx, y: vy, dispose: () => {} } };
  }
  const split = args.validationSplit;
  if (split === undefined || split === 0) return { trainX: x, trainY: y };
  if (!(split > 0 && split < 1))
    throw new TandemError('BAD_CONFIG', `fit: validationSplit must be in (0, 1), got ${String(split)}`);
  const n = x.shape[0];
  const at = Math.floor(n * (1 - split));
  const [trainX, valX] = [x.slice(0, at), x.slice(at, n - at)];
  const [trainY, valY] = [y.slice(0, at), y.slice(at, n - at)];
  return { trainX, trainY, validation: { x: valX, y: valY, dispose: () => tf.dispose([valX, valY]) } };
}
