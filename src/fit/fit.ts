/**
 * `fit(model, x, y, args)`: tfjs's `model.fit` on tandem's devices. The compiled model (topology, weights, optimizer)
 * and the samples go to a private directory every device thread reads (fit-files.ts); the epochs are one tandem run
 * (fit-loop.ts) that pauses at each epoch's end, so that between epochs the trained weights are in `model`,
 * validation runs on them and tfjs's callbacks run with tfjs's logs, in tfjs's order, and may stop the training
 * (`model.stopTraining`). Returns a `tf.History`.
 */
import * as tf from '#tfjs';
import type { TrainConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import { firstNonFinite } from '../engine/non-finite.js';
import { fitTargets, requireCompiled } from './fit-targets.js';
import { writeFitFiles } from './fit-files.js';
import { checkBatchCoversDevices, FIT_IGNORED, fitSettings, tandemOptions, warnIgnoredArgs } from './fit-args.js';
import type { FitArgs } from './fit-args.js';
import { splitValidation } from './fit-validation.js';
import { ValidationPool } from './validation-pool.js';
import type { ValidationOn } from './evaluate.js';

export type { ValidationOn } from './evaluate.js';
import { fitLoop, type FitStyle } from './fit-loop.js';
import { classWeightOf } from './fit-class-weight.js';
import { fitDigest } from './fit-hosts.js';
import { onOutputsPath, writeOutputsSpec } from './fit-outputs.js';
import { flatInputModel, inputsOf, packInputs, type FitX } from './fit-inputs.js';
import { oneOutput, severalOutputs, type FitY } from './fit-several-outputs.js';
import { spansSteps } from '../optim/lr-schedule.js';
import { asOnlyFit } from './one-fit.js';

export type { FitArgs, FitOptions } from './fit-args.js';
export type { FitY } from './fit-several-outputs.js';
export type { FitStyle } from './fit-loop.js';

/**
 * tfjs's `model.fit(x, y, args)` on tandem's devices; `args` also takes tandem's options (devices, backend, …). `x`:
 * a Tensor, or for a model of several inputs a Tensor[] or `{ inputName: Tensor }` (fit-inputs.ts).
 */
export async function fit(model: tf.LayersModel, x: FitX, y: FitY, args: FitArgs = {}): Promise<tf.History> {
  return asOnlyFit(model, 'fit', () => fitOnce(model, x, y, args));
}

async function fitOnce(model: tf.LayersModel, x: FitX, y: FitY, args: FitArgs): Promise<tf.History> {
  const settings = fitSettings(args);
  requireCompiled(model);
  const outputs = onOutputsPath(model) ? severalOutputs(model, y, args) : undefined;
  ({ y, args } = outputs ?? oneOutput(model, y, args)); // one tensor of targets (several outputs': flat)
  const made: tf.Tensor[] = []; // every tensor this fit makes (never the caller's), disposed at its end
  let pool: ValidationPool | undefined;
  try {
    const { inputs, trainX, trainY, validation } = fitData(model, x, y, args, made);
    // several inputs: one flat row per sample; several outputs: one flat output
    const trained = outputs?.trained ?? (inputs.length > 1 ? flatInputModel(model) : model);
    const { batchSize } = settings;
    const names = outputs && { spec: outputs.run.spec, names: model.metricsNames };
    pool = validation && new ValidationPool(trained, validation.x, validation.y, batchSize, devicesOf(args), names);
    const validate = pool;
    return await fitWith(model, trainX, trainY, args, {
      ...settings,
      callbacks: args.callbacks,
      yieldEvery: args.yieldEvery,
      params: { samples: trainX.shape[0], steps: null, batchSize, initialEpoch: settings.initialEpoch },
      batchLogsBeforeBegin: false,
      validate: validate && (() => validate.logs()),
      validatePart: validate && (hosts => validate.part(hosts)),
      trained,
      ...(outputs ? { outputs: outputs.run } : {}),
      digest: () =>
        fitDigest({
          epochs: settings.epochs,
          initialEpoch: settings.initialEpoch,
          batchSize,
          shuffle: settings.shuffle,
          validationSplit: args.validationSplit ?? 0,
          validationData: args.validationData,
          classWeight: args.classWeight,
          x: inputs,
          y,
          'the model': modelDigest(model),
        }),
    });
  } finally {
    await pool?.close();
    tf.dispose(made);
    outputs?.dispose();
  }
}

/**
 * What fit trains and validates on: x's inputs (a tensor of rank 1 as [n, 1], as model.fit takes it), packed into one
 * row a sample, split from the validation; each tensor made here is pushed to `made`. BAD_DATA where x and y differ in
 * samples, where nothing is left to train on, or where a sample trained on is not finite.
 */
function fitData(model: tf.LayersModel, x: FitX, y: tf.Tensor, args: FitArgs, made: tf.Tensor[]) {
  const ours = (t: tf.Tensor, given: tf.Tensor[]) => (given.includes(t) || made.includes(t) ? t : (made.push(t), t));
  const givenInputs = inputsOf(model, x, 'x');
  const inputs = givenInputs.map(t => ours(rank2(t), givenInputs));
  if (inputs[0].shape[0] !== y.shape[0])
    throw new TandemError(
      'BAD_DATA',
      `fit: x has ${inputs[0].shape[0]} samples and y ${y.shape[0]}; give as many of each`,
    );
  tandemOptions(args); // refused before the split
  warnIgnoredArgs(args, FIT_IGNORED, 'fit');
  const flatX = ours(packInputs(inputs), givenInputs);
  const given = args.validationData;
  const several = model.inputs.length > 1 || !(given?.[0] instanceof tf.Tensor) || given[0].rank === 1;
  const givenValidation = given && several ? inputsOf(model, given[0], 'validationData') : [];
  const validationX =
    given && several
      ? ours(packInputs(givenValidation.map(t => ours(rank2(t), givenValidation))), givenValidation)
      : undefined;
  const flatArgs = validationX ? { ...args, validationData: [validationX, ...given!.slice(1)] as typeof given } : args;
  const { trainX, trainY, validation } = splitValidation(flatX, y, flatArgs);
  if (trainX !== flatX) made.push(trainX, trainY);
  if (validation)
    made.push(...[validation.x, validation.y].filter(t => t !== validationX && t !== given?.[0] && t !== given?.[1]));
  refuseEmptyTraining(inputs[0].shape[0], trainX.shape[0], args.validationSplit);
  refuseNonFiniteTraining(model, inputs, y, trainX.shape[0]);
  return { inputs, trainX, trainY, validation };
}

/** BAD_DATA when no sample is left to train on (model.fit would train none and return an empty History). */
function refuseEmptyTraining(samples: number, trained: number, split: number | undefined): void {
  if (trained > 0) return;
  throw new TandemError(
    'BAD_DATA',
    samples === 0
      ? 'fit: x has no samples; give at least one (model.fit would train nothing and return an empty History)'
      : `fit: validationSplit ${split} leaves none of x's ${samples} samples to train on ` +
          `(floor(${samples} × (1 − ${split})) = 0); give a smaller split or more samples`,
  );
}

/**
 * `x`, `y` trained in batches of `args.batchSize` (in order unless `args.shuffle`), with the loop of `style`; the
 * History returned. fit and fitDataset share it.
 */
export async function fitWith(
  model: tf.LayersModel,
  x: tf.Tensor,
  y: tf.Tensor,
  args: FitArgs,
  style: FitStyle,
): Promise<tf.History> {
  const options = tandemOptions(args);
  const { batchSize, shuffle } = fitSettings(args);
  checkBatchCoversDevices(
    options,
    batchSize,
    `fit: batchSize ${batchSize} is`,
    n => `give a batchSize of at least ${n}`,
  );
  const trained = style.trained ?? model; // what the devices build: the model, or its flat-input wrapper
  const targets = style.outputs?.targets ?? fitTargets(trained);
  const samples = x.shape[0];
  const stepsPerEpoch = Math.ceil(samples / batchSize); // the last batch may be smaller, as model.fit trains it
  const targetsY = targets.targets(y);
  const files = await writeFitFiles(tf, trained, x, targetsY, targets.classes, 'fit');
  try {
    const outputs = style.outputs;
    if (outputs) await writeOutputsSpec(files.modelJson, { ...outputs.spec, classWeights: outputs.classWeights });
    const config: TrainConfig = {
      ...options,
      model: files.modelJson,
      data: files.dataModule,
      loss: targets.loss,
      batch: batchSize,
      shuffle,
      partialBatch: (options.accumulate ?? 1) === 1, // micro-batches split whole batches only
      ...(spansSteps(options.lrSchedule)
        ? {
            lrScheduleSteps:
              options.lrScheduleSteps ?? Math.max(1, (style.epochs - style.initialEpoch) * stepsPerEpoch),
          }
        : {}), // decay spans every epoch
      classWeight: classWeightOf(args.classWeight, trained, targets, targetsY),
      ...(targets.metrics ? { metrics: targets.metrics } : {}),
      ...(style.outputs
        ? { method: style.outputs.method, plugins: [...(options.plugins ?? []), style.outputs.plugin] }
        : {}),
    };
    const batchSizes = Array.from({ length: stepsPerEpoch }, (_, b) => Math.min(batchSize, samples - b * batchSize));
    return await fitLoop({ model, targets, config, stepsPerEpoch, batchSize, batchSizes }, style);
  } finally {
    await files.remove();
  }
}

/**
 * What of `model` every host's must share: its layers' classes, settings and weight shapes (not their names, which
 * tfjs numbers per process), its compile() settings and its optimizer's iterations. Its weights may differ: host 0's
 * go to every device.
 */
function modelDigest(model: tf.LayersModel): unknown {
  const optimizer = model.optimizer;
  const unnamed = (config: unknown): unknown =>
    JSON.parse(JSON.stringify(config, (key, v: unknown) => (key === 'name' ? undefined : v)));
  const sources = (v: unknown): unknown =>
    JSON.parse(JSON.stringify(v, (_, x: unknown) => (typeof x === 'function' ? x.toString() : x)) ?? 'null');
  const compiled = (model as unknown as { metricsTensors?: [unknown, number][] }).metricsTensors ?? [];
  return {
    layers: model.layers.map(l => ({ class: l.getClassName(), config: unnamed(l.getConfig()) })),
    weights: model.weights.map(w => w.shape),
    loss: sources(model.loss), // a loss or metric function by its source: each host rebuilds its own
    metrics: model.metricsNames,
    metricFunctions: sources(compiled.map(([fn]) => fn)),
    // its iterations: a host whose optimizer trained more (its state goes on into the run) would train otherwise
    optimizer: optimizer && {
      class: optimizer.getClassName(),
      config: optimizer.getConfig(),
      iterations: optimizer.iterations,
    },
  };
}

/** The devices, backend and plugins of `args` that validation runs on (those given). */
export function devicesOf(args: ValidationOn): ValidationOn {
  return {
    ...(args.devices !== undefined ? { devices: args.devices } : {}),
    ...(args.backend !== undefined ? { backend: args.backend } : {}),
    ...(args.plugins !== undefined ? { plugins: args.plugins } : {}),
  };
}

/** Each input of `x`, and `y`, refused on a non-finite value in the first `rows` samples (the ones trained). */
function refuseNonFiniteTraining(model: tf.LayersModel, inputs: tf.Tensor[], y: tf.Tensor, rows: number): void {
  const named = (i: number) => (inputs.length > 1 ? `x's input ${model.inputNames[i]}` : 'x');
  inputs.forEach((input, i) => refuseNonFinite(input, rows, named(i), 'an input'));
  refuseNonFinite(y, rows, 'y', 'a target');
}

/**
 * BAD_DATA naming the first non-finite value in the first `rows` samples of `tensor` (those fit trains on), as the
 * data modules refuse one: tfjs would train the weights to NaN.
 */
function refuseNonFinite(tensor: tf.Tensor, rows: number, what: string, kind: string): void {
  const data = tensor.dataSync();
  if (!(data instanceof Float32Array)) return; // integers and booleans (tfjs's cpu cast keeps an int's Int32Array)
  const per = tensor.size / Math.max(1, tensor.shape[0]);
  const values = data.subarray(0, rows * per);
  const k = firstNonFinite(values);
  if (k < 0) return;
  throw new TandemError(
    'BAD_DATA',
    `fit: ${what} has ${values[k]} at sample ${Math.floor(k / per)}, element ${k % per}; clean or impute the data ` +
      `before training (${kind} of NaN or Infinity makes the loss and the weights NaN)`,
  );
}

/** A tensor of rank 1 as [n, 1] (a new tensor), as tfjs's fit takes it; any other as it is. */
function rank2(t: tf.Tensor): tf.Tensor {
  return t.rank === 1 ? tf.expandDims(t, 1) : t;
}
