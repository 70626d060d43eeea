/**
 * What a compiled tfjs model's `compile` settings are on tandem: its loss as a tandem loss, its targets `y` as the
 * labels (or float targets) tandem's devices read, and its metrics as the History keys tfjs names them. What tandem
 * cannot train like tfjs yet is refused with the reason and the way out.
 */
import type * as tfNs from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import { isRegressionLoss, type LossKind } from '../model/loss-kinds.js';
import { outputActivation } from '../model/output-loss.js';
import { metricFunctionsOf } from './fit-metrics.js';
import { TFJS_ONLY_LOSSES } from './user-functions.js';
import type { FitCaller } from './fit-caller.js';

/** tfjs-layers' loss names (and their aliases) as tandem losses. */
export const LOSS_NAMES: Readonly<Record<string, LossKind>> = {
  categoricalCrossentropy: 'categorical',
  sparseCategoricalCrossentropy: 'categorical',
  binaryCrossentropy: 'binary',
  meanSquaredError: 'mse',
  mse: 'mse',
  MSE: 'mse',
  meanAbsoluteError: 'mae',
  mae: 'mae',
  MAE: 'mae',
  meanAbsolutePercentageError: 'mape',
  mape: 'mape',
  MAPE: 'mape',
  meanSquaredLogarithmicError: 'msle',
  msle: 'msle',
  MSLE: 'msle',
  logcosh: 'logcosh',
  poisson: 'poisson',
};

/** The metric functions whose value is the accuracy tandem's devices count for a loss of that kind (`correct`). */
const ACCURACY_FUNCTIONS: Readonly<Record<'categorical' | 'binary', readonly string[]>> = {
  categorical: ['categoricalAccuracy', 'sparseCategoricalAccuracy'],
  binary: ['binaryAccuracy'],
};

export interface FitTargets {
  loss: LossKind;
  /** Classes of the labels (1 for a regression). */
  classes: number;
  /** The metric keys tfjs logs after `loss`, in `model.metricsNames` order. */
  metricKeys: string[];
  /**
   * The tfjs metric functions of those keys, when the devices compute them (model/metric-values.ts); absent: every
   * key is the accuracy the devices count.
   */
  metrics?: string[];
  /** The devices' method computes every key's two sums itself (models of several outputs: fit-outputs.ts). */
  metricsByMethod?: boolean;
  /**
   * `y` as the devices read it: one label (class id, 0/1, or float target) per sample; or, when `y` is no such thing
   * (an image, a sequence, several labels or floats, soft labels per sample), its values and one sample's shape.
   */
  targets(y: tfNs.Tensor): FitY;
}

/** One label per sample (`targetShape` absent), or a target tensor of `targetShape` per sample. */
export interface FitY {
  values: Float32Array;
  targetShape?: number[];
}

/**
 * BAD_MODEL unless `model` is compiled (before anything reads its inputs: an unbuilt Sequential names none); `who`
 * (fit, fitDataset, evaluate) begins the refusal.
 */
export function requireCompiled(model: tfNs.LayersModel, who: FitCaller = 'fit'): void {
  if (!model.optimizer || model.loss === undefined)
    throw new TandemError(
      'BAD_MODEL',
      `${who}: the model is not compiled; call model.compile({ optimizer, loss }) first`,
    );
}

/** The run's loss, labels and metric keys of a compiled `model`, else BAD_MODEL / BAD_CONFIG saying why. */
export function fitTargets(model: tfNs.LayersModel, who: FitCaller = 'fit'): FitTargets {
  requireCompiled(model, who);
  if (model.outputs.length !== 1 || model.inputs.length !== 1)
    throw new TandemError(
      'BAD_MODEL',
      `${who}: fitTargets was given a model of ${model.inputs.length} input(s) and ${model.outputs.length} ` +
        "output(s); tandem's own wrappers (fit-inputs, fit-outputs) make one of each first: this is tandem's bug, " +
        'please report it with the model',
    );
  const given: unknown = Array.isArray(model.loss) ? model.loss[0] : model.loss;
  const lossName = typeof given === 'string' ? given : undefined;
  const kind = lossName !== undefined && Object.hasOwn(LOSS_NAMES, lossName) ? LOSS_NAMES[lossName] : undefined;
  if (!kind)
    throw new TandemError(
      'BAD_CONFIG',
      `${who}: loss ${lossName !== undefined ? `'${lossName}'` : 'given as a function'} is not one tandem trains; ` +
        `compile with one of ${[...Object.keys(LOSS_NAMES), ...TFJS_ONLY_LOSSES].join(', ')}, or a function`,
    );
  const units = model.outputs[0].shape[model.outputs[0].shape.length - 1] ?? 1;
  checkActivation(model, kind, lossName!, who);
  const metricKeys = model.metricsNames.slice(1);
  const functions = metricFunctionsOf(model, who);
  const accuracyOnly = !isRegressionLoss(kind) && functions.every(f => ACCURACY_FUNCTIONS[kind].includes(f));
  const metrics = functions.length === 0 || accuracyOnly ? undefined : functions;
  const classes = kind === 'binary' ? 2 : isRegressionLoss(kind) ? 1 : units;
  const output = model.outputs[0].shape.slice(1);
  const targets = (y: tfNs.Tensor) => targetsOf(y, lossName!, kind, output, metrics !== undefined);
  return { loss: kind, classes, metricKeys, ...(metrics ? { metrics } : {}), targets };
}

/** tandem reads a classifier's output as probabilities only after a softmax (sigmoid), as tfjs's losses take them. */
function checkActivation(model: tfNs.LayersModel, kind: LossKind, lossName: string, who: FitCaller): void {
  const wanted = kind === 'categorical' ? 'softmax' : kind === 'binary' ? 'sigmoid' : undefined;
  const activation = outputActivation(model);
  if (wanted && activation !== wanted)
    throw new TandemError(
      'BAD_MODEL',
      `${who}: loss '${lossName}' takes probabilities, and the model's output ends in '${activation}', not ` +
        `'${wanted}'; end the model in activation '${wanted}' (tandem would read a '${activation}' output as logits)`,
    );
}

/** `y` as one label per sample where it is one (the devices' fast path), else as a target tensor per sample. */
function targetsOf(y: tfNs.Tensor, lossName: string, kind: LossKind, output: (number | null)[], tensor: boolean): FitY {
  const values = Float32Array.from(y.dataSync() as Float32Array);
  const n = y.shape[0] ?? 0;
  const units = output[output.length - 1] ?? 1;
  const perSample = y.rank === 1 ? [1] : y.shape.slice(1); // tfjs takes y of [n] as [n, 1]
  const oneValue = perSample.every(d => d === 1); // [n] or [n, 1]
  if (tensor) {
    // the devices compute metrics on y as tfjs has it
  } else if (lossName === 'categoricalCrossentropy' && y.rank === 2 && output.length === 1 && y.shape[1] === units) {
    const classes = oneHotClasses(values, n, units);
    if (classes) return { values: classes };
  } else if (lossName === 'categoricalCrossentropy' && oneValue && units > 1) {
    // model.fit refuses it too: its targets are one row of `units` probabilities per sample
    badTargets(lossName, y, oneHotWanted(output));
  } else if (kind === 'categorical' && oneValue && output.length === 1) {
    if (values.some(v => !Number.isInteger(v) || v < 0 || v >= units))
      badTargets(lossName, y, `integer class ids in [0, ${units})`);
    return { values };
  } else if (oneValue && output.length === 1 && units === 1) {
    if (kind !== 'binary' || values.every(v => v === 0 || v === 1)) return { values };
  }
  // a target tensor per sample: the output's shape (class ids for sparse: without its last axis, or it of size 1)
  const sparse = lossName === 'sparseCategoricalCrossentropy';
  const wanted = sparse ? [...output.slice(0, -1)] : output;
  const fits = (shape: (number | null)[]) =>
    shape.length === perSample.length && shape.every((d, i) => d === null || d === perSample[i]);
  if (!fits(wanted) && !(sparse && fits([...wanted, 1])))
    badTargets(
      lossName,
      y,
      `targets of the model's output shape ` + `[${wanted.join(', ')}]${sparse ? ' (class ids)' : ''}`,
    );
  if (sparse && values.some(v => !Number.isInteger(v) || v < 0 || v >= units))
    badTargets(lossName, y, `integer class ids in [0, ${units})`);
  return { values, targetShape: perSample };
}

/** A one-hot `y`'s class per sample; undefined when a row is not one-hot (soft labels: a target tensor then). */
function oneHotClasses(values: Float32Array, n: number, units: number): Float32Array | undefined {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let hot = -1;
    for (let c = 0; c < units; c++) {
      const v = values[i * units + c];
      if (v === 1 && hot < 0) hot = c;
      else if (v !== 0) hot = -2;
    }
    if (hot < 0) return undefined;
    out[i] = hot;
  }
  return out;
}

function oneHotWanted(output: (number | null)[]): string {
  return (
    `targets of the model's output shape [${output.join(', ')}] (one-hot rows, as model.fit takes them); ` +
    classIdsFix(output[output.length - 1] ?? 1)
  );
}

/** The way out for class ids given to categoricalCrossentropy on `units` classes (fit-outputs.ts says it too). */
export function classIdsFix(units: number): string {
  return `for class ids compile with loss 'sparseCategoricalCrossentropy', or give tf.oneHot(ids, ${units})`;
}

function badTargets(lossName: string, y: tfNs.Tensor, wanted: string): never {
  throw new TandemError(
    'BAD_DATA',
    `fit: y of shape [${y.shape.join(', ')}] for loss '${lossName}': expected ${wanted}`,
  );
}
