/**
 * A model of several inputs on tandem's devices, which read one sample per index: `x` as tfjs takes it (a Tensor,
 * Tensor[] in `model.inputs` order, or `{ inputName: Tensor }`) packed into one flat row per sample (each input's
 * values one after the other), and the model wrapped in one that takes that row and cuts it back into the inputs with
 * tfjs's own layers (Reshape, Cropping2D, Reshape: no weights) before calling the model. The wrapper shares the model's
 * variables, in the model's order, so the devices train the model's weights, and its loss and metrics are the model's.
 */
import * as tf from '#tfjs';
import { TandemError } from '../errors.js';
import { requireCompiled } from './fit-targets.js';
import type { FitCaller } from './fit-caller.js';

/** What tfjs's fit takes as x. */
export type FitX = tf.Tensor | tf.Tensor[] | Record<string, tf.Tensor>;

/**
 * `x` as one tensor per input of `model`, in its inputs' order, each of `n` samples; BAD_DATA saying what differs,
 * begun by `who` (fit, fitDataset, evaluate).
 */
export function inputsOf(model: tf.LayersModel, x: FitX, what: string, who: FitCaller = 'fit'): tf.Tensor[] {
  const list = inputList(model, x, what, who);
  list.forEach((t, i) => refuseOddInput(model, t, i, what, who));
  return list;
}

/** A tensor of strings, or samples not of the model's input's shape, refused (a tensor of rank 1 is [n, 1]). */
function refuseOddInput(model: tf.LayersModel, t: tf.Tensor, i: number, what: string, who: FitCaller): void {
  const names = model.inputNames;
  const label = names.length > 1 ? `${what}'s input ${names[i]}` : what;
  if (t.dtype === 'string' || t.dtype === 'complex64')
    throw new TandemError('BAD_DATA', `${who}: ${label} is a tensor of ${t.dtype}; the model takes numbers`);
  const want = model.inputs[i].shape.slice(1);
  const got = t.rank === 1 ? [1] : t.shape.slice(1); // as tfjs's fit and evaluate take it
  if (got.length === want.length && want.every((d, k) => d === null || d === got[k])) return;
  throw new TandemError(
    'BAD_DATA',
    `${who}: ${label} has shape [${t.shape.join(', ')}]: samples of [${got.join(', ')}], and the model's input ` +
      `${names[i]} takes samples of [${want.map(d => d ?? 'any').join(', ')}]`,
  );
}

/** `x` as one tensor per input of `model`, in its inputs' order, each of `n` samples. */
function inputList(model: tf.LayersModel, x: FitX, what: string, who: FitCaller): tf.Tensor[] {
  const names = model.inputNames;
  if (x instanceof tf.Tensor) {
    if (names.length === 1) return [x];
    throw new TandemError(
      'BAD_DATA',
      `${who}: ${what} is one tensor, and the model has ${names.length} inputs (${names.join(', ')}); give one ` +
        `tensor per input: an array in that order ([${names.join(', ')}]) or an object by name ` +
        `({ ${names.join(', ')} })`,
    );
  }
  const list = Array.isArray(x)
    ? x
    : names.map(name => {
        if (!(x[name] instanceof tf.Tensor))
          throw new TandemError('BAD_DATA', `${who}: ${what} has no tensor for input '${name}' (inputs: ${names})`);
        return x[name];
      });
  if (list.length !== names.length || list.some(t => !(t instanceof tf.Tensor)))
    throw new TandemError(
      'BAD_DATA',
      `${who}: ${what} gives ${list.length} tensor(s) and the model has ${names.length} input(s) ` +
        `(${names.join(', ')}); give one tensor per input, in that order or by name`,
    );
  const n = list[0].shape[0];
  const odd = list.findIndex(t => t.shape[0] !== n);
  if (odd >= 0)
    throw new TandemError(
      'BAD_DATA',
      `${who}: ${what}'s input ${names[odd]} has ${list[odd].shape[0]} samples and ${names[0]} ${n}`,
    );
  return list;
}

/** Several inputs' tensors as one [n, total] tensor (a new one); one input's as it is (the caller's, kept). */
export function packInputs(xs: tf.Tensor[]): tf.Tensor {
  if (xs.length === 1) return xs[0];
  return tf.tidy(() =>
    tf.concat(
      xs.map(t => tf.reshape(t, [t.shape[0], -1])),
      1,
    ),
  );
}

/** tfjs-layers' metricsMap keys (4.x): metric names compile resolves as such. */
const METRIC_STRINGS = new Set([
  'acc',
  'accuracy',
  'ce',
  'crossentropy',
  'binaryAccuracy',
  'categoricalAccuracy',
  'precision',
  'categoricalCrossentropy',
  'sparseCategoricalCrossentropy',
  'mse',
  'MSE',
  'mae',
  'MAE',
  'mape',
  'MAPE',
  'cosine',
]);

/** A model of one flat input that cuts it into `model`'s inputs and calls `model`; compiled as `model` is. */
export function flatInputModel(model: tf.LayersModel): tf.LayersModel {
  const { flat, parts } = cutInputs(model);
  const wrapper = tf.model({ inputs: flat, outputs: model.apply(parts) as tf.SymbolicTensor });
  // the model's metrics under the names it logs them by: its strings as given, its functions as they are
  const compiled =
    (model as unknown as { metricsTensors?: [(yTrue: tf.Tensor, yPred: tf.Tensor) => tf.Tensor, number][] })
      .metricsTensors ?? [];
  const metrics = model.metricsNames.slice(1).map((name, i) => (METRIC_STRINGS.has(name) ? name : compiled[i][0]));
  wrapper.compile({ optimizer: model.optimizer, loss: model.loss, metrics });
  return wrapper;
}

/** One flat input of `model`'s inputs' values side by side, and the inputs cut out of it (tfjs layers, no weights). */
export function cutInputs(model: tf.LayersModel): { flat: tf.SymbolicTensor; parts: tf.SymbolicTensor[] } {
  requireCompiled(model);
  const shapes = model.inputs.map(input => input.shape.slice(1));
  if (shapes.some(s => s.some(d => d === null)))
    throw new TandemError(
      'BAD_MODEL',
      `fit: a model of several inputs trains on tandem when each input's shape is fixed; the inputs are ` +
        `${shapes.map(s => `[${s.join(', ')}]`).join(', ')}: give each a fixed shape`,
    );
  const sizes = shapes.map(s => (s as number[]).reduce((a, b) => a * b, 1));
  const total = sizes.reduce((a, b) => a + b, 0);
  const flat = tf.input({ shape: [total] });
  const column = tf.layers.reshape({ targetShape: [total, 1, 1] }).apply(flat) as tf.SymbolicTensor;
  let at = 0;
  const parts = shapes.map((shape, i) => {
    const cut = tf.layers
      .cropping2D({
        cropping: [
          [at, total - at - sizes[i]],
          [0, 0],
        ],
      })
      .apply(column);
    at += sizes[i];
    return tf.layers.reshape({ targetShape: shape as number[] }).apply(cut as tf.SymbolicTensor) as tf.SymbolicTensor;
  });
  return { flat, parts };
}
