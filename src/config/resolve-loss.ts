/** The loss of a run: the one the config names, else the one a saved model.json was compiled with. */
import { bad, oneOf } from '../config-checks.js';
import { LOSS_KINDS, isRegressionLoss, type LossKind } from '../config-types.js';
import { BUILTIN_DATASETS, isImageFolder } from '../data/resolve-dataset.js';
import { sourcePath } from '../source-path.js';
import { dataParallelMethod } from './data-parallel-method.js';

/**
 * The loss the config names, else the one a saved model.json (`source`) was compiled with (`savedLossEntry`, its
 * trainingConfig's), else undefined (read from the output).
 */
export function resolveLoss(
  given: unknown,
  source: string,
  savedLossEntry: unknown,
  method: string,
  dataSource: string,
  classes: number,
): LossKind | undefined {
  const loss = namedLoss(given, source, savedLossEntry);
  if (loss === undefined) return undefined;
  if (!dataParallelMethod(method) && loss !== 'categorical')
    bad(
      'loss',
      `--method ${method} trains a classifier head with categorical cross-entropy; '${loss}' applies to data-parallel`,
    );
  if (isRegressionLoss(loss) && (BUILTIN_DATASETS as readonly string[]).includes(dataSource)) {
    bad(
      'loss',
      `${loss} (regression) needs float targets: a data module whose read(index, out, offset) returns the target; ` +
        `'${dataSource}' has class labels`,
    );
  }
  if (isRegressionLoss(loss) && isImageFolder(dataSource))
    bad(
      'loss',
      `${loss} (regression) needs float targets; image folder ${dataSource} has class labels (its ` + `subfolders)`,
    );
  if (loss === 'binary' && classes !== 2)
    bad('loss', `binary cross-entropy needs two classes; the data has ${classes}`);
  return loss;
}

/** The loss the config names, else the one a saved model.json was compiled with, else undefined; unchecked. */
export function namedLoss(given: unknown, source: string, savedLossEntry: unknown): LossKind | undefined {
  return given === undefined ? savedLoss(source, savedLossEntry) : oneOf('loss', given, LOSS_KINDS);
}

/** The loss in a saved model.json's (`source`) trainingConfig, `given`, as a tandem loss. */
function savedLoss(source: string, given: unknown): LossKind | undefined {
  if (given === undefined) return undefined;
  // One output's loss: compile({ loss: 'x' }), ['x'] or { output: 'x' } (tfjs saves the last two as given).
  const saved: unknown = Array.isArray(given)
    ? given.length === 1
      ? given[0]
      : given
    : given !== null && typeof given === 'object' && Object.keys(given).length === 1
      ? Object.values(given)[0]
      : given;
  const name = typeof saved === 'string' ? saved : JSON.stringify(saved);
  const kind = Object.hasOwn(SAVED_LOSS_NAMES, name) ? SAVED_LOSS_NAMES[name] : undefined;
  if (!kind) {
    bad(
      'loss',
      `${sourcePath(source)} was compiled with loss ${name}, which tandem does not train; give loss: ` +
        `${LOSS_KINDS.slice(0, -1).join(', ')} or ${LOSS_KINDS[LOSS_KINDS.length - 1]}`,
    );
  }
  return kind;
}

/**
 * The loss names a saved model.json's trainingConfig may carry, as tandem losses: tfjs-layers' (its lossesMap and
 * the aliases it exports: mse, MSE, mae, ...), keras's snake_case ones, and for huber (in no lossesMap) tfjs-core's
 * huberLoss and keras's huber_loss / huber, whose delta is tandem's (1).
 */
const SAVED_LOSS_NAMES: Readonly<Record<string, LossKind>> = {
  sparseCategoricalCrossentropy: 'categorical',
  categoricalCrossentropy: 'categorical',
  sparse_categorical_crossentropy: 'categorical',
  categorical_crossentropy: 'categorical',
  binaryCrossentropy: 'binary',
  binary_crossentropy: 'binary',
  meanSquaredError: 'mse',
  mean_squared_error: 'mse',
  mse: 'mse',
  MSE: 'mse',
  meanAbsoluteError: 'mae',
  mean_absolute_error: 'mae',
  mae: 'mae',
  MAE: 'mae',
  meanAbsolutePercentageError: 'mape',
  mean_absolute_percentage_error: 'mape',
  mape: 'mape',
  MAPE: 'mape',
  meanSquaredLogarithmicError: 'msle',
  mean_squared_logarithmic_error: 'msle',
  msle: 'msle',
  MSLE: 'msle',
  logcosh: 'logcosh',
  log_cosh: 'logcosh',
  logCosh: 'logcosh',
  poisson: 'poisson',
  huberLoss: 'huber',
  huber_loss: 'huber',
  huber: 'huber',
};
