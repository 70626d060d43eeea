/**
 * What a compiled tfjs model's `compile` settings are on tandem: its loss as a tandem loss, its targets `y` as the
 * labels (or float targets) tandem's devices read, and its metrics as the History keys tfjs names them. What tandem
 * cannot train like tfjs yet is refused with the reason and the way out.
 */
import type * as tfNs from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import { isRegressionLoss, type LossKind } from '../model/loss-kinds.js';
import { outputActivation } from '../model/output-loss.js';

/** tfjs-layers' loss names (and their aliases) as tandem losses. */
const LOSS_NAMES: Readonly<Record<string, LossKind>> = {
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

/** The metric names whose value is tandem's per-step accuracy, for a loss of that kind. */
const ACCURACY_NAMES: Readonly<Record<'categorical' | 'binary', readonly string[]>> = {
  categorical: ['acc', 'accuracy', 'categoricalAccuracy', 'sparseCategoricalAccuracy'],
  binary: ['acc', 'accuracy', 'binaryAccuracy'],
};

export interface FitTargets {
  loss: LossKind;
  /** Classes of the labels (1 for a regression). */
  classes: number;
  /** The metric keys tfjs logs after `loss` (each tandem's accuracy), in `model.metricsNames` order. */
  metricKeys: string[];
  /** One label (class id, 0/1, or float target) per sample of `y`. */
  labels(y: tfNs.Tensor): Float32Array;
}

/** The run's loss, labels and metric keys of a compiled `model`, else BAD_MODEL / BAD_CONFIG saying why. */
export function fitTargets(model: tfNs.LayersModel): FitTargets {
  if (!model.optimizer || model.loss === undefined)
    throw new TandemError('BAD_MODEL', 'fit: the model is not compiled; call model.compile({ optimizer, loss }) first');
  if (model.outputs.length !== 1 || model.inputs.length !== 1)
    throw new TandemError(
      'BAD_MODEL',
      `fit: the model has ${model.inputs.length} input(s) and ${model.outputs.length} output(s); tandem's fit trains ` +
        'models of one input and one output so far',
    );
  const given: unknown = Array.isArray(model.loss) ? model.loss[0] : model.loss;
  const lossName = typeof given === 'string' ? given : undefined;
  const kind = lossName !== undefined && Object.hasOwn(LOSS_NAMES, lossName) ? LOSS_NAMES[lossName] : undefined;
  if (!kind)
    throw new TandemError(
      'BAD_CONFIG',
      `fit: loss ${lossName !== undefined ? `'${lossName}'` : 'given as a function'} is not one tandem trains; ` +
        `compile with one of ${Object.keys(LOSS_NAMES).join(', ')}`,
    );
  const units = model.outputs[0].shape[model.outputs[0].shape.length - 1] ?? 1;
  checkActivation(model, kind, lossName!);
  const metricKeys = model.metricsNames.slice(1);
  for (const key of metricKeys) {
    if (isRegressionLoss(kind) || !ACCURACY_NAMES[kind].includes(key))
      throw new TandemError(
        'BAD_CONFIG',
        `fit: metric '${key}' is not one tandem reports per batch (it reports the loss and, for a classifier, ` +
          "the accuracy: metrics ['accuracy']); compile without it, or compute it with evaluate after fit",
      );
  }
  const classes = kind === 'binary' ? 2 : isRegressionLoss(kind) ? 1 : units;
  return { loss: kind, classes, metricKeys, labels: y => labelsOf(y, lossName!, kind, units) };
}

/** tandem reads a classifier's output as probabilities only after a softmax (sigmoid), as tfjs's losses take them. */
function checkActivation(model: tfNs.LayersModel, kind: LossKind, lossName: string): void {
  const wanted = kind === 'categorical' ? 'softmax' : kind === 'binary' ? 'sigmoid' : undefined;
  const activation = outputActivation(model);
  if (wanted && activation !== wanted)
    throw new TandemError(
      'BAD_MODEL',
      `fit: loss '${lossName}' takes probabilities, and the model's output ends in '${activation}', not ` +
        `'${wanted}'; end the model in activation '${wanted}' (tandem would read a '${activation}' output as logits)`,
    );
}

/** `y` as one value per sample: a one-hot row's class, a sparse label, a 0/1 label or a float target. */
function labelsOf(y: tfNs.Tensor, lossName: string, kind: LossKind, units: number): Float32Array {
  const values = y.dataSync() as Float32Array;
  const n = y.shape[0] ?? 0;
  if (lossName === 'categoricalCrossentropy') {
    if (y.rank !== 2 || y.shape[1] !== units)
      badTargets(lossName, y, `one-hot rows of ${units} (the model's output units)`);
    return oneHotClasses(values, n, units, lossName);
  }
  if ((y.rank !== 1 && !(y.rank === 2 && y.shape[1] === 1)) || values.length !== n)
    badTargets(lossName, y, 'one value per sample ([n] or [n, 1])');
  const out = Float32Array.from(values);
  if (kind === 'categorical' && out.some(v => !Number.isInteger(v) || v < 0 || v >= units))
    badTargets(lossName, y, `integer class ids in [0, ${units})`);
  if (kind === 'binary' && out.some(v => v !== 0 && v !== 1)) badTargets(lossName, y, 'labels 0 or 1');
  return out;
}

function oneHotClasses(values: Float32Array, n: number, units: number, lossName: string): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let hot = -1;
    for (let c = 0; c < units; c++) {
      const v = values[i * units + c];
      if (v === 1 && hot < 0) hot = c;
      else if (v !== 0) hot = -2;
    }
    if (hot < 0)
      throw new TandemError(
        'BAD_DATA',
        `fit: y row ${i} is not one-hot (${lossName} on tandem trains hard labels: one 1, the rest 0); ` +
          'soft labels are not supported yet',
      );
    out[i] = hot;
  }
  return out;
}

function badTargets(lossName: string, y: tfNs.Tensor, wanted: string): never {
  throw new TandemError(
    'BAD_DATA',
    `fit: y of shape [${y.shape.join(', ')}] for loss '${lossName}': expected ${wanted}`,
  );
}
