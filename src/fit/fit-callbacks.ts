/**
 * `fit`'s callbacks as tfjs's `model.fit` runs them: `CustomCallbackArgs` objects become `tf.CustomCallback`s,
 * `BaseCallback` instances (`tf.callbacks.earlyStopping`, `tf.CustomCallback`, subclasses) are used as given, and a
 * `tf.History` comes last; one `tf.CallbackList` calls them in that order, with tfjs's `params`.
 */
import * as tf from '#tfjs';
import { TandemError } from '../errors.js';

type CallbackListArgs = ConstructorParameters<typeof tf.CallbackList>[0];
export type BaseCallbackLike = NonNullable<CallbackListArgs>[number];
export type FitCallbacks = tf.ModelFitArgs['callbacks'];
type YieldEvery = ConstructorParameters<typeof tf.CustomCallback>[1];

/** The params tfjs's `configureCallbacks` gives every callback. */
export interface FitParams {
  epochs: number;
  initialEpoch: number | null;
  samples: number | null;
  steps: number | null;
  batchSize: number | null;
  verbose: number;
  doValidation: boolean;
  metrics: string[];
}

/** The user's callbacks, then a History, in one list, its params set and its model the user's. */
export function fitCallbackList(
  model: tf.LayersModel,
  given: FitCallbacks,
  yieldEvery: YieldEvery,
  params: FitParams,
): { list: tf.CallbackList; history: tf.History } {
  const history = new tf.History();
  const list = new tf.CallbackList([...standardized(given, yieldEvery), history]);
  list.setParams(params as unknown as Parameters<tf.CallbackList['setParams']>[0]);
  list.setModel(model);
  return { list, history };
}

function isBaseCallback(c: unknown): c is BaseCallbackLike {
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof (c as { setParams?: unknown }).setParams === 'function' &&
    typeof (c as { setModel?: unknown }).setModel === 'function'
  );
}

/** As tfjs's standardizeCallbacks: BaseCallbacks as they are, callback objects wrapped in a CustomCallback. */
function standardized(given: FitCallbacks, yieldEvery: YieldEvery): BaseCallbackLike[] {
  if (given === undefined || given === null) return [];
  const list: unknown[] = Array.isArray(given) ? given : [given];
  return list.map((c, i) => {
    if (isBaseCallback(c)) return c;
    if (typeof c !== 'object' || c === null)
      throw new TandemError(
        'BAD_CONFIG',
        `fit: callbacks[${i}] is ${c === null ? 'null' : typeof c}; give tf.callbacks.earlyStopping(…), a ` +
          'tf.CustomCallback, or an object of functions ({ onEpochEnd: async (epoch, logs) => … })',
      );
    return new tf.CustomCallback(c as tf.CustomCallbackArgs, yieldEvery) as unknown as BaseCallbackLike;
  });
}
