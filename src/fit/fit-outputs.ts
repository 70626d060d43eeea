/**
 * Models of several outputs on `fit`: `y` as a Tensor[] (the outputs' order) or `{ outputName: Tensor }`, a loss per
 * output (compile's loss as one name for all, a list or a map), `lossWeights` (fit's argument: tfjs 4.22's compile
 * drops it), History keys as tfjs names them (`loss`, `<output>_loss`, `<output>_<metric>`). The devices train a
 * wrapper of the model with one flat output (each output's values in a row, side by side, by weightless tfjs layers
 * sharing the model's variables) on one flat target row per sample; the fit-outputs method (fit-outputs-method.ts)
 * cuts both back into the outputs and computes each output's loss as tfjs does, their sum weighted by `lossWeights`
 * (as Keras weighs them), and every metric's two sums.
 */
import * as tf from '#tfjs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { TandemError } from '../errors.js';
import { classIdsFix, LOSS_NAMES, type FitTargets } from './fit-targets.js';
import type { LossKind } from '../model/loss-kinds.js';
import { cutInputs } from './fit-inputs.js';
import { functionName, noMetricFunction, tfjsMetricName } from './fit-metrics.js';
import { TFJS_ONLY_LOSSES, tfjsLoss, userFunctionOf, type UserFunction } from './user-functions.js';
import type { FitCaller } from './fit-caller.js';

/** One output as the devices cut it out of the flat output and the flat target row. */
export interface OutputSpec {
  name: string;
  /** One sample's output shape, and its values. */
  shape: number[];
  size: number;
  /** One sample's target shape as `y` gives it, and its values. */
  targetShape: number[];
  targetSize: number;
  kind: LossKind;
  weight: number;
  /** compile's loss of this output as the user's function (user-functions.ts); `kind` is then unused. */
  lossFunction?: UserFunction;
}

/**
 * The outputs, and each logged metric after `loss`: an output's loss (fn null), a tfjs metric of an output, or the
 * user's own metric function (`user`, fn null).
 */
export interface OutputsSpec {
  outputs: OutputSpec[];
  metrics: { fn: string | null; output: number; user?: UserFunction }[];
  /**
   * Training only (validation's losses are unweighted, as tfjs's): per output, its weight per class id
   * (fit-class-weight.ts `outputClassWeights`), or null.
   */
  classWeights?: (number[] | null)[];
}

/** The file, beside the model.json the devices load, that tells the fit-outputs method the outputs. */
export const OUTPUTS_FILE = 'outputs.json';

/** `lossWeights` as fit takes it: one number per output, in order, or `{ outputName: number }`. */
export type LossWeights = number[] | Record<string, number>;

/**
 * `y` of a model of several outputs as its tensors in the outputs' order (BAD_DATA saying what is wrong); `who` and
 * `what` (the argument that gave `y`) name it in the refusal.
 */
export function outputsOf(model: tf.LayersModel, y: unknown, who: FitCaller = 'fit', what = 'y'): tf.Tensor[] {
  const names = model.outputNames;
  if (names.length === 1 && y instanceof tf.Tensor) return [y]; // one output with a function (onOutputsPath)
  const list = Array.isArray(y)
    ? (y as unknown[])
    : y !== null && typeof y === 'object' && !(y instanceof tf.Tensor)
      ? names.map(n => (y as Record<string, unknown>)[n])
      : undefined;
  const extra = list && !Array.isArray(y) ? Object.keys(y as object).filter(k => !names.includes(k)) : [];
  if (!list || list.length !== names.length || list.some(t => !(t instanceof tf.Tensor)) || extra.length > 0) {
    const byName = `{ ${names.map(n => `${n}: Tensor`).join(', ')} }`;
    throw new TandemError(
      'BAD_DATA',
      (names.length === 1
        ? `${who}: the model has one output (${names[0]}); give ${what} as a Tensor, [Tensor] or ${byName}`
        : `${who}: the model has ${names.length} outputs (${names.join(', ')}); give ${what} as a Tensor[] of ` +
          `${names.length} in that order or as ${byName}`) +
        (extra.length > 0 ? ` (${what} names ${extra.join(', ')}, not an output)` : ''),
    );
  }
  return list as tf.Tensor[];
}

type LossFn = (yTrue: tf.Tensor, yPred: tf.Tensor) => tf.Tensor;
/** A loss by tandem's name, the user's function, or a loss tfjs names that trains as tfjs's function. */
type CompiledLoss = string | LossFn | { tfjs: string };

/** Each output's loss, from compile's loss: one for all, a list in the outputs' order, or a map by name. */
function lossesOf(model: tf.LayersModel, who: FitCaller): CompiledLoss[] {
  const given: unknown = model.loss;
  const names = model.outputNames;
  const each = Array.isArray(given)
    ? (given as unknown[])
    : typeof given === 'object' && given !== null
      ? names.map(n => (given as Record<string, unknown>)[n])
      : names.map(() => given);
  return each.map((loss, i) => {
    if (typeof loss === 'function') return loss as CompiledLoss;
    if (typeof loss === 'string' && Object.hasOwn(LOSS_NAMES, loss)) return loss;
    if (typeof loss === 'string' && TFJS_ONLY_LOSSES.includes(loss)) return { tfjs: loss };
    throw new TandemError(
      'BAD_CONFIG',
      `${who}: output ${names[i]}'s loss ${typeof loss === 'string' ? `'${loss}'` : `of type ${typeof loss}`} is not ` +
        `one tandem trains; compile with one of ${[...Object.keys(LOSS_NAMES), ...TFJS_ONLY_LOSSES].join(', ')} ` +
        'per output, or a function',
    );
  });
}

/**
 * Whether `model` trains as the outputs' wrapper: several outputs, or a loss or metric that is the user's own
 * function (which the fit-outputs method computes from its source, user-functions.ts).
 */
export function onOutputsPath(model: tf.LayersModel): boolean {
  if (model.outputs.length > 1) return true;
  const given: unknown = Array.isArray(model.loss) ? model.loss[0] : model.loss;
  const compiled = (model as unknown as { metricsTensors?: [unknown, number][] }).metricsTensors ?? [];
  const tfjsOnly = typeof given === 'string' && TFJS_ONLY_LOSSES.includes(given);
  return (
    typeof given === 'function' || tfjsOnly || compiled.some(([fn]) => typeof fn === 'function' && !tfjsMetricName(fn))
  );
}

/** Where output `output`'s functions are probed: its targets `y`, their shape per sample. */
interface ProbeSite {
  model: tf.LayersModel;
  y: tf.Tensor;
  output: number;
  targetShape: number[];
}

/** `use` of probe targets and outputs for the site's functions: its first rows of `y`, outputs in (0.1, 0.9). */
function withProbe<T>({ model, y, output, targetShape }: ProbeSite, use: (y: tf.Tensor, p: tf.Tensor) => T): T {
  const rows = Math.max(1, Math.min(4, y.shape[0]));
  const shape = model.outputs[output].shape.slice(1) as number[];
  const [py, pp] = tf.tidy(() => [
    tf.reshape(tf.cast(y.slice(0, rows), 'float32'), [rows, ...targetShape]),
    tf.randomUniform([rows, ...shape], 0.1, 0.9, 'float32', 7),
  ]);
  try {
    return use(py, pp);
  } finally {
    tf.dispose([py, pp]);
  }
}

/** `lossWeights` as one number per output (1 each when not given). */
function weightsOf(model: tf.LayersModel, given: LossWeights | undefined, who: FitCaller): number[] {
  const names = model.outputNames;
  if (given === undefined) return names.map(() => 1);
  const list = Array.isArray(given) ? given : names.map(n => given[n] ?? 1);
  const unknown = Array.isArray(given) ? [] : Object.keys(given).filter(k => !names.includes(k));
  if (list.length !== names.length || list.some(w => typeof w !== 'number' || !Number.isFinite(w)) || unknown.length)
    throw new TandemError(
      'BAD_CONFIG',
      `${who}: lossWeights must be ${names.length} finite numbers (one per output: ${names.join(', ')}) or ` +
        `{ outputName: number }${unknown.length ? `; ${unknown.join(', ')} is not an output` : ''}`,
    );
  return list;
}

/**
 * An output's `y` of the shape tfjs's fit takes for it (its `standardizeInputData`), else BAD_DATA naming the output
 * and both shapes: the output's per sample; for sparseCategoricalCrossentropy, class ids (its last axis 1, or without
 * it). It used to reach the devices and fail there ("Size(6) must match the product of shape 2,2").
 */
function checkOutputTargets(name: string, output: number[], loss: CompiledLoss, y: tf.Tensor, who: FitCaller): void {
  const given = y.rank === 1 ? [1] : y.shape.slice(1);
  const same = (want: number[]) => want.length === given.length && want.every((d, k) => d === given[k]);
  const sparse = loss === 'sparseCategoricalCrossentropy';
  if (sparse ? same([...output.slice(0, -1), 1]) || same(output.slice(0, -1)) : same(output)) return;
  const lossName = typeof loss === 'string' ? loss : typeof loss === 'object' ? loss.tfjs : 'a function';
  const wanted = sparse
    ? `class ids of shape [${[...output.slice(0, -1), 1].join(', ')}]`
    : `targets of the output's shape [${output.join(', ')}]` +
      (loss === 'categoricalCrossentropy' && same([1])
        ? ` (one-hot rows); ${classIdsFix(output[output.length - 1])}`
        : '');
  throw new TandemError(
    'BAD_DATA',
    `${who}: y of output ${name} has shape [${y.shape.join(', ')}] for loss ${lossName}: expected ${wanted} per sample`,
  );
}

/**
 * The outputs' spec of `model` for targets `ys` (the outputs' order) and `lossWeights`; `who` (fit, fitDataset,
 * evaluate) begins its refusals.
 */
export function outputsSpec(
  model: tf.LayersModel,
  ys: tf.Tensor[],
  lossWeights?: LossWeights,
  who: FitCaller = 'fit',
): OutputsSpec {
  const losses = lossesOf(model, who);
  const weights = weightsOf(model, lossWeights, who);
  const outputs = model.outputs.map((o, i): OutputSpec => {
    const shape = o.shape.slice(1);
    if (shape.some(d => d === null))
      throw new TandemError(
        'BAD_MODEL',
        `${who}: output ${model.outputNames[i]} has no fixed shape [${shape.join(', ')}]`,
      );
    const targetShape = ys[i].rank === 1 ? [1] : ys[i].shape.slice(1);
    const count = (s: number[]) => s.reduce((a, b) => a * b, 1);
    const loss = losses[i];
    checkOutputTargets(model.outputNames[i], shape as number[], loss, ys[i], who);
    const site = { model, y: ys[i], output: i, targetShape };
    return {
      name: model.outputNames[i],
      shape: shape as number[],
      size: count(shape as number[]),
      targetShape,
      targetSize: count(targetShape),
      weight: weights[i],
      ...(typeof loss === 'string'
        ? { kind: LOSS_NAMES[loss] }
        : typeof loss === 'object'
          ? { kind: 'mse' as const, lossFunction: tfjsLoss(loss.tfjs) }
          : checkedLoss(site, loss, `the loss of output ${model.outputNames[i]}`)),
    };
  });
  const compiled = (model as unknown as { metricsTensors?: [(...a: unknown[]) => unknown, number][] }).metricsTensors;
  const keys = model.metricsNames.slice(1);
  const perOutputLosses = outputs.length > 1 ? outputs.length : 0; // tfjs logs `<output>_loss` of several first
  const metrics = (compiled ?? []).map(([fn, output], k) => {
    if (k < perOutputLosses) return { fn: null, output }; // `<output>_loss`
    if (typeof fn !== 'function') throw noMetricFunction(keys[k], model.outputNames[output]);
    const name = tfjsMetricName(fn);
    if (name) return { fn: name, output };
    const what = `metric '${keys[k]}'`;
    const site = { model, y: ys[output], output, targetShape: outputs[output].targetShape };
    const user = checkedFunction(site, fn as LossFn, what);
    return { fn: null, output, user };
  });
  return { outputs, metrics };
}

/** The user's function `fn` at `site`, checked as the devices will rebuild it (user-functions.ts). */
function checkedFunction(site: ProbeSite, fn: LossFn, what: string): UserFunction {
  return withProbe(site, (y, p) => userFunctionOf(tf, fn, `fit: ${what}`, y, p));
}

/** What `f` returns, or undefined where it throws. */
function attempt<T>(f: () => T): T | undefined {
  try {
    return f();
  } catch {
    return undefined;
  }
}

/**
 * A loss function's kind: one of tfjs's own (`tf.metrics.meanSquaredError`, `tf.losses.meanSquaredError`: its name
 * is a loss name and it gives that loss's batch mean on the probe) trains as that name; any other is the user's.
 */
function checkedLoss(site: ProbeSite, fn: LossFn, what: string): Pick<OutputSpec, 'kind' | 'lossFunction'> {
  const name = functionName(fn).replace(/__op$/, '');
  const own = Object.hasOwn(LOSS_NAMES, name) ? (tf.metrics as unknown as Record<string, LossFn>)[name] : undefined;
  const means =
    own && withProbe(site, (y, p) => attempt(() => tf.tidy(() => [fn, own].map(f => tf.mean(f(y, p)).dataSync()[0]))));
  if (means && Math.abs(means[0] - means[1]) <= 1e-6 * Math.max(1, Math.abs(means[1])))
    return { kind: LOSS_NAMES[name] };
  return { kind: 'mse', lossFunction: checkedFunction(site, fn, what) };
}

/** FitTargets of the flat wrapper: `y` (the targets' tensors, concatenated per sample) as one target row. */
export function outputsTargets(model: tf.LayersModel): FitTargets {
  return {
    loss: 'mse', // the devices' loss is the fit-outputs method's; a regression kind: no class labels
    classes: 1,
    metricKeys: model.metricsNames.slice(1),
    metricsByMethod: true,
    targets: y => ({ values: Float32Array.from(y.dataSync()), targetShape: [y.shape[1] ?? 1] }),
  };
}

/** The targets of every output side by side, one row per sample: `[n, Σ targetSize]`. */
export function flatTargets(ys: tf.Tensor[]): tf.Tensor {
  return tf.tidy(() =>
    tf.concat(
      ys.map(y => tf.reshape(tf.cast(y, 'float32'), [y.shape[0], -1])),
      1,
    ),
  );
}

/**
 * A model of one output, the outputs of `model` side by side (flattened), compiled with its optimizer; a model of
 * several inputs also takes them as one flat input (fit-inputs.ts).
 */
export function flatOutputModel(model: tf.LayersModel): tf.LayersModel {
  const cut = model.inputs.length > 1 ? cutInputs(model) : undefined;
  const outputs = cut ? (model.apply(cut.parts) as tf.SymbolicTensor[]) : model.outputs;
  const parts = outputs.map(o => (o.rank > 2 ? (tf.layers.flatten().apply(o) as tf.SymbolicTensor) : o));
  const flat = parts.length === 1 ? parts[0] : (tf.layers.concatenate({ axis: -1 }).apply(parts) as tf.SymbolicTensor);
  const wrapper = tf.model({ inputs: cut?.flat ?? model.inputs, outputs: flat });
  wrapper.compile({ optimizer: model.optimizer, loss: 'meanSquaredError' });
  return wrapper;
}

/** Writes `spec` beside `modelJson`, where the fit-outputs method reads it on every device thread. */
export async function writeOutputsSpec(modelJson: string, spec: OutputsSpec): Promise<void> {
  const dir = path.dirname(modelJson);
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, OUTPUTS_FILE), JSON.stringify(spec));
}
