/**
 * `fit`'s arguments: tfjs's `ModelFitArgs` and tandem's own options in one object, told apart here; the tfjs
 * arguments tandem does not run yet, and the train options `fit` sets itself, are refused with the way out; those
 * tfjs's own fit ignores are ignored, with a warning.
 */
import type * as tf from '@tensorflow/tfjs';
import type { TrainConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import type { FitCaller } from './fit-caller.js';
import { DEFAULT_DEVICES } from '../world/world-options.js';

/** The train options `fit` sets from the model, the tensors and tfjs's arguments. */
const FIT_OWNS = [
  'model',
  'data',
  'loss',
  'batch',
  'steps',
  'epochs',
  'shuffle',
  'partialBatch',
  'classWeight',
  'metrics',
  'classes',
  'imageSize',
  'datasetSize',
  'heldOut',
  'evalSamples',
  'resume',
  'checkpointDir',
  'checkpointEvery',
  'keepCheckpoints',
  'optimizer',
  'lr',
  'tensorboard',
] as const;

/** tandem's options `fit` passes to the run: devices, backend, strategy, hosts, … (compile() gives the rest). */
export type FitOptions = Omit<TrainConfig, (typeof FIT_OWNS)[number]>;

/** tfjs's `model.fit` arguments, and tandem's options in the same object. */
export type FitArgs = tf.ModelFitArgs &
  FitOptions & {
    /**
     * A model of several outputs: each output's loss weight (in the outputs' order, or `{ outputName: weight }`), as
     * Keras's compile takes it; tfjs 4.22's compile drops it, so fit takes it (fit-outputs.ts).
     */
    lossWeights?: number[] | Record<string, number>;
  };

/** tfjs's keys of `ModelFitArgs`. */
const TFJS_KEYS = new Set([
  'batchSize',
  'epochs',
  'verbose',
  'callbacks',
  'validationSplit',
  'validationData',
  'shuffle',
  'classWeight',
  'sampleWeight',
  'initialEpoch',
  'stepsPerEpoch',
  'validationSteps',
  'yieldEvery',
]);

/** Where what a train option of FIT_OWNS says comes from in a fit, by key (the rest: compile() or fit's arguments). */
const INSTEAD: Readonly<Record<string, string>> = {
  model: 'fit(model, x, y)',
  data: 'fit(model, x, y): x and y',
  batch: "fit's batchSize",
  steps: "fit's epochs (each epoch all of x's batches)",
  loss: "the model's compile({ loss })",
  metrics: "the model's compile({ metrics })",
  optimizer: "the model's compile({ optimizer })",
  lr: "the optimizer given to the model's compile() (its learning rate), or fit's lrSchedule",
  heldOut: "fit's validationSplit or validationData",
};

/** What tandem does not run yet, by tfjs key. */
const NOT_YET: Readonly<Record<string, string>> = {
  sampleWeight: 'model.fit itself does not support it either',
};

/**
 * tfjs keys that tfjs 4.22's `model.fit` takes and ignores (its fitLoop is called with them null), by key: what runs
 * instead. fit ignores them too, so a program written for model.fit runs, and says so once.
 */
export const FIT_IGNORED: Readonly<Record<string, string>> = {
  stepsPerEpoch: 'each epoch trains all of x',
  validationSteps: 'validation runs on all of the validation data',
};

/**
 * A process warning (code TANDEM_FIT_IGNORED) for each argument of `args` that `ignored` names: one that tfjs's
 * `model.fit` or `model.evaluate` (`who`) takes and ignores, and so does tandem's.
 */
export function warnIgnoredArgs(
  args: object,
  ignored: Readonly<Record<string, string>>,
  who: Exclude<FitCaller, 'fitDataset'>,
): void {
  for (const [key, instead] of Object.entries(ignored))
    if ((args as Record<string, unknown>)[key] !== undefined)
      process.emitWarning(`${who}: ${key} is ignored, as tfjs's model.${who} ignores it: ${instead}`, {
        code: 'TANDEM_FIT_IGNORED',
      });
}

/** tandem's options of `args` (every key not tfjs's), after refusing what `fit` cannot take. */
export function tandemOptions(args: FitArgs): FitOptions {
  const options: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(args)) {
    if (value === undefined) continue;
    if (Object.hasOwn(NOT_YET, key))
      throw new TandemError('BAD_CONFIG', `fit: ${key} is not supported on tandem yet: ${NOT_YET[key]}`);
    if (TFJS_KEYS.has(key)) continue;
    if (key === 'lossWeights')
      throw new TandemError(
        'BAD_CONFIG',
        'fit: lossWeights weighs the losses of a model of several outputs; this model has one',
      );
    if (key === 'tensorboard')
      throw new TandemError(
        'BAD_CONFIG',
        "fit: give callbacks: [tensorBoard(dir)] (tandem's, shaped like tf.node.tensorBoard) for TensorBoard " +
          "event files, not 'tensorboard'",
      );
    if (key === 'earlyStopping' || key === 'keepBest')
      throw new TandemError(
        'BAD_CONFIG',
        `fit: ${key} is tandem train's option; give fit ` +
          (key === 'earlyStopping'
            ? "callbacks: [earlyStopping({ monitor, patience })] (tandem's, or tf.callbacks.earlyStopping)"
            : 'callbacks: [bestCheckpoints({ dir, keep, monitor })]'),
      );
    if ((FIT_OWNS as readonly string[]).includes(key))
      throw new TandemError(
        'BAD_CONFIG',
        `fit: ${key} comes from ${INSTEAD[key] ?? "the model's compile() or from fit's own arguments"}; ` +
          `remove '${key}' from fit's arguments`,
      );
    options[key] = value;
  }
  return options as FitOptions;
}

/**
 * tfjs's defaults for the arguments fit reads, checked as tfjs checks them: `model.fit` takes 0 epochs (a History of
 * none), `model.fitDataset` wants at least one.
 */
export function fitSettings(
  args: FitArgs,
  who: Exclude<FitCaller, 'evaluate'> = 'fit',
): {
  batchSize: number;
  epochs: number;
  initialEpoch: number;
  shuffle: boolean;
  verbose: number;
} {
  const batchSize = args.batchSize ?? 32;
  const epochs = args.epochs ?? 1;
  const initialEpoch = args.initialEpoch ?? 0;
  for (const [key, v, min] of [
    ['batchSize', batchSize, 1],
    ['epochs', epochs, who === 'fit' ? 0 : 1],
    ['initialEpoch', initialEpoch, 0],
  ] as const) {
    if (!Number.isInteger(v) || v < min)
      throw new TandemError('BAD_CONFIG', `${who}: ${key} must be an integer ≥ ${min}, got ${String(v)}`);
  }
  return { batchSize, epochs, initialEpoch, shuffle: args.shuffle ?? true, verbose: args.verbose ?? 1 };
}

/**
 * A batch of at least as many samples as the run's devices (each device trains a sample of every full batch; the
 * config refuses it too, naming config.batch): refused in the caller's words, `what` naming `batch` with its verb
 * ("fit: batchSize 2 is") and `fix` mending it ("give a batchSize of at least N").
 */
export function checkBatchCoversDevices(
  options: { devices?: number; hosts?: number },
  batch: number,
  what: string,
  fix: (devices: number) => string,
): void {
  const devices = (options.devices ?? DEFAULT_DEVICES) * (options.hosts ?? 1);
  if (Number.isInteger(devices) && batch < devices)
    throw new TandemError(
      'BAD_CONFIG',
      `${what} smaller than the devices (${devices}): every device trains a sample of each batch; ` +
        `${fix(devices)}, or train on fewer devices`,
    );
}
