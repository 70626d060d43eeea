/**
 * Validation as tfjs's `model.fit` does it: `validationData`, or the last `validationSplit` of x and y (tfjs slices
 * at floor(n · (1 - split))); evaluated across the devices at the end of every epoch on the trained weights, in
 * batches of the fit's batch size, logged as `val_<name>` of the model's `metricsNames`.
 */
import * as tf from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import type { FitArgs } from './fit-args.js';
import { evaluate, type EvaluateArgs } from './evaluate.js';

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

/**
 * `val_loss`, `val_<metric>`: the validation samples evaluated across the devices (evaluate.ts: each device thread a
 * run of whole batches, their means weighted by samples), which is what tfjs's fit computes with `model.evaluate`.
 */
export async function validationLogs(
  model: tf.LayersModel,
  validation: Pick<Validation, 'x' | 'y'>,
  batchSize: number,
  on: Pick<EvaluateArgs, 'devices' | 'backend'>,
): Promise<Record<string, number>> {
  const out = await evaluate(model, validation.x, validation.y, { batchSize, ...definedOf(on) });
  const scalars = Array.isArray(out) ? out : [out];
  const logs: Record<string, number> = {};
  for (const [i, name] of model.metricsNames.entries()) logs[`val_${name}`] = (await scalars[i].data())[0];
  tf.dispose(scalars);
  return logs;
}

function definedOf(on: Pick<EvaluateArgs, 'devices' | 'backend'>): Pick<EvaluateArgs, 'devices' | 'backend'> {
  return {
    ...(on.devices !== undefined ? { devices: on.devices } : {}),
    ...(on.backend !== undefined ? { backend: on.backend } : {}),
  };
}
