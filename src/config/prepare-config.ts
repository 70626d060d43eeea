/**
 * The prepare phase of a train config, after the synchronous checks: what needs a module, a file or a dataset —
 * a comm hook given as a path, a saved model.json's optimizer and loss, the dataset (a data module imported and
 * probed), the model (a user module built once to check its shapes) — and the rules that need their answers.
 */
import { dataParallelMethod } from './data-parallel-method.js';
import { TandemError } from '../errors.js';
import { bad } from '../config-checks.js';
import { isRegressionLoss, type ResolvedConfig } from '../config-types.js';
import type { LossKind } from '../model/loss-kinds.js';
import { getTransport, DEFAULT_TRANSPORT } from '../collectives/transport-registry.js';
import { resolveCommHook } from '../pipeline/resolve-comm-hook.js';
import { inputScaleWarning } from '../data/input-scale.js';
import { GlobalBatchSampler, stepsPerEpochOf } from '../data/sampler.js';
import type { ModelSpec } from '../model/resolve-model.js';
import { getMethod } from '../methods/method-registry.js';
import { positiveInt } from '../options/option-checks.js';
import type { CheckedConfig, CheckedFields } from './checked-config.js';
import { optimizerOf, savedOptimizerState, savedTrainingConfig } from './saved-model.js';
import { checkClassLabels, heldOutSplit, prepareData } from './prepare-data.js';
import type { PreparedData } from './prepared-data.js';
import { namedLoss, resolveLoss } from './resolve-loss.js';
import { checkModuleModelShapes } from './module-model-shapes.js';
import { shardedUpdateApplies } from './sharded-update.js';
import { resolveLrSchedule } from '../optim/lr-schedule.js';
import { epochLogsOf } from './epoch-logs-config.js';

export async function prepareConfig(checked: CheckedConfig): Promise<ResolvedConfig> {
  const { config, fields, modelSource, dataSource } = checked;
  const { devices, batch, seed } = fields;
  // auto: the hook's options are checked once a hook is picked
  const commHook =
    config.commHook === 'auto' ? undefined : await resolveCommHook(config.commHook, config.commHookOptions);
  const source = checked.modelUrl ?? modelSource;
  const trainingConfig = savedTrainingConfig(source); // a saved model.json's compiled optimizer and loss
  const optimizer = optimizerOf(config, source, trainingConfig?.optimizer_config);
  const regression = isRegressionLoss(namedLoss(config.loss, source, trainingConfig?.loss));
  const prepared = await prepareData(checked, regression);
  const { meta, data } = prepared;
  const sampleShape = [...meta.sampleShape];
  const method = getMethod(config.method ?? 'data-parallel');
  const { trainSize, evalSamples } = heldOutSplit(config, meta.size, method, batch, devices);
  const classifier = method.resolveOptions(config, { classes: meta.classes, devices });
  const localHeads = method.localState ? method.name : undefined;
  const savedState = await savedOptimizerState(config, source, trainingConfig, optimizer, localHeads);
  checkMinImage(checked, sampleShape);
  const outputs = classifier ? classifier.embedding : meta.classes; // classifier methods: a feature extractor's
  const model: ModelSpec = { source, options: { inputShape: sampleShape, classes: outputs, seed } };
  const loss = resolveLoss(config.loss, source, trainingConfig?.loss, method.name, dataSource, meta.classes);
  const targetShape = meta.targetShape && targetShapeOf(meta.targetShape, method.name, config.classWeight);
  await checkLossAndModel(checked, prepared, loss, model, { trainSize, evalSamples }, method.ownTargets === true);
  const { partialBatch, stepsPerEpoch, steps } = stepsOf(config, trainSize, batch, method.name);
  const shuffle = config.shuffle !== false;
  const firstBatch = () =>
    new GlobalBatchSampler(trainSize, batch, seed, devices, shuffle, partialBatch).batchIndices(1);
  const { inputWarning, dataWarnings } = warningsOf(checked, prepared, firstBatch, data.source);
  const resolved = assemble(checked, {
    method: method.name,
    classifier,
    trainSize,
    shuffle,
    partialBatch,
    evalSamples,
    inputWarning,
    ...(dataWarnings ? { dataWarnings } : {}),
    model,
    data,
    datasetSize: meta.size,
    sampleShape,
    classes: meta.classes,
    ...(prepared.classNames ? { classNames: prepared.classNames } : {}),
    targetShape,
    steps,
    stepsPerEpoch,
    ...savedState,
    lrSchedule: resolveLrSchedule(config, optimizer.lr, steps, stepsPerEpoch),
    commHook,
    loss,
    classWeight: classWeightOf(config.classWeight, loss, meta.classes, method.name),
    metrics: config.metrics?.length ? metricsOf(targetShape) && config.metrics : undefined,
  });
  Object.assign(resolved, epochLogsOf(config, method.name, loss, resolved.metrics));
  refuseNonBlockingTransport(resolved, method.computeCommunicator(resolved) !== undefined, method.name);
  if (!shardedUpdateApplies(resolved)) resolved.localUpdate = 'replica';
  return resolved;
}

/** What host 0 warns of once for the job: a data module's first batch far outside the usual range, data left out. */
function warningsOf(
  checked: CheckedConfig,
  prepared: PreparedData,
  firstBatch: () => ArrayLike<number>,
  source: string,
): { inputWarning?: string; dataWarnings?: string[] } {
  if (!checked.writer) return {};
  const { userDataset, dataWarnings } = prepared;
  return {
    ...(userDataset ? { inputWarning: inputScaleWarning(userDataset, firstBatch(), source) } : {}),
    ...(dataWarnings ? { dataWarnings } : {}),
  };
}

/** The labels fit the loss, and the model's output the loss and the data. */
async function checkLossAndModel(
  { dataSource, builtinModel, modelSource }: CheckedConfig,
  prepared: Awaited<ReturnType<typeof prepareData>>,
  loss: ResolvedConfig['loss'],
  model: ModelSpec,
  { trainSize, evalSamples }: { trainSize: number; evalSamples: number },
  ownTargets: boolean,
): Promise<void> {
  const labelled: [number, number] = [trainSize, Math.min(prepared.meta.size, trainSize + evalSamples)];
  const targetShape = prepared.meta.targetShape && [...prepared.meta.targetShape];
  if (!isRegressionLoss(loss) && !targetShape) checkClassLabels(prepared, dataSource, loss, labelled);
  if (builtinModel && isRegressionLoss(loss))
    bad(
      'loss',
      `${loss} (regression) needs a model with one output; builtin '${modelSource}' outputs one score per class`,
    );
  const { inputShape, classes } = model.options;
  if (builtinModel && targetShape)
    bad('data', `gives targets of shape [${targetShape.join(', ')}]; builtin '${modelSource}' is a classifier`);
  if (!builtinModel)
    await checkModuleModelShapes(model, inputShape, classes, modelSource, dataSource, loss, targetShape, ownTargets);
}

/** The run's steps: `steps`, or `epochs` of `stepsPerEpoch` each (default: one epoch). */
function stepsOf(config: CheckedConfig['config'], trainSize: number, batch: number, method: string) {
  const partialBatch = partialBatchOf(config.partialBatch, method, config.accumulate ?? 1);
  const stepsPerEpoch = stepsPerEpochOf(trainSize, batch, partialBatch);
  const steps =
    config.epochs !== undefined ? config.epochs * stepsPerEpoch : positiveInt()(config.steps ?? stepsPerEpoch, 'steps');
  return { partialBatch, stepsPerEpoch, steps };
}

/** The class weights, for a classifier of as many classes; undefined when none are given. */
function classWeightOf(given: number[] | undefined, loss: LossKind | undefined, classes: number, method: string) {
  if (given === undefined) return undefined;
  if (!dataParallelMethod(method)) bad('classWeight', `is for data-parallel training, not --method ${method}`);
  if (isRegressionLoss(loss)) bad('classWeight', `weighs classes; loss ${loss} is a regression`);
  if (given.length !== classes)
    bad('classWeight', `has ${given.length} weights for ${classes} classes; give one weight per class id`);
  return given;
}

/** A dataset's target shape: data-parallel training only, without class weights. */
function targetShapeOf(shape: readonly number[], method: string, classWeight: unknown): number[] {
  if (!dataParallelMethod(method))
    bad(
      'data',
      `gives targets of a shape (targetShape); --method ${method} trains class labels, data-parallel ` + `trains them`,
    );
  if (classWeight !== undefined)
    bad('classWeight', 'weighs class labels, and the data gives targets of a shape (targetShape); leave one out');
  return [...shape];
}

/** Metrics are computed on targets of a shape. */
function metricsOf(targetShape: number[] | undefined): true {
  if (!targetShape)
    bad('metrics', 'are computed on targets of a shape: a data module with a targetShape (fit gives one)');
  return true;
}

/** Whether each epoch's last, smaller batch is trained: data-parallel only. */
function partialBatchOf(given: boolean | undefined, method: string, accumulate: number): boolean {
  if (given === true && !dataParallelMethod(method))
    bad('partialBatch', `is for data-parallel training; --method ${method} trains full batches only`);
  if (given === true && accumulate > 1)
    bad('partialBatch', `and accumulate ${accumulate}: micro-batches split whole batches only; drop one of the two`);
  return given === true;
}

/** What the prepare phase found. */
type Prepared = Omit<ResolvedConfig, keyof CheckedFields | 'perDevice'>;

/** The resolved config, in the order its fields have always had. */
function assemble({ fields: f }: CheckedConfig, p: Prepared): ResolvedConfig {
  return {
    onNan: f.onNan,
    checkpointEvery: f.checkpointEvery,
    checkpointDir: f.checkpointDir,
    resume: f.resume,
    keepCheckpoints: f.keepCheckpoints,
    stopGraceMs: f.stopGraceMs,
    replicaCheckEvery: f.replicaCheckEvery,
    ...pick(
      p,
      'method',
      'classifier',
      'trainSize',
      'shuffle',
      'partialBatch',
      'evalSamples',
      'inputWarning',
      'dataWarnings',
      'model',
      'data',
      'datasetSize',
    ),
    ...pick(p, 'sampleShape', 'classes'),
    ...(p.classNames ? { classNames: p.classNames } : {}),
    ...(p.targetShape ? { targetShape: p.targetShape } : {}),
    ...pick(f, 'devices', 'topology', 'rendezvous', 'backend', 'nativeThreads', 'nativeFusion', 'precision'),
    ...pick(f, 'batch'),
    perDevice: Math.ceil(f.batch / f.devices), // the most rows a device trains (partialBatch splits unevenly)
    accumulate: f.accumulate,
    ...pick(p, 'steps', 'stepsPerEpoch', 'optimizer'),
    ...(p.optimizerStateFrom ? { optimizerStateFrom: p.optimizerStateFrom } : {}),
    ...(p.optimizerWarning ? { optimizerWarning: p.optimizerWarning } : {}),
    ...(p.lrSchedule ? { lrSchedule: p.lrSchedule } : {}),
    ...pick(f, 'seed', 'strategy', 'strategyOptions', 'exchange', 'link', 'trace', 'allReduce', 'localUpdate'),
    ...pick(f, 'transport', 'overwrite'),
    ...pick(p, 'commHook', 'loss', 'classWeight'),
    ...(p.metrics ? { metrics: p.metrics } : {}),
    ...pick(f, 'batchNorm', 'forwardWait', 'plugins', 'out', 'stallTimeoutMs', 'loaderThreads', 'pluginOptions'),
  };
}

function pick<T, K extends keyof T>(from: T, ...keys: K[]): Pick<T, K> {
  const out = {} as Pick<T, K>;
  for (const k of keys) out[k] = from[k];
  return out;
}

function checkMinImage(checked: CheckedConfig, sampleShape: number[]): void {
  const minImage = checked.builtinModel?.minImageSize;
  if (minImage === undefined) return;
  const [h, w] = sampleShape;
  if (sampleShape.length !== 3 || h < minImage || w < minImage) {
    throw new TandemError(
      'SHAPE_MISMATCH',
      `model '${checked.modelSource}' needs images [height, width, channels] of at least ${minImage}x${minImage}; ` +
        `data '${checked.dataSource}' gives samples of shape [${sampleShape.join(', ')}]. ` +
        'Use --model mlp (any sample shape), a model module of your own, ' +
        'or, with synthetic-images, a larger --image-size.',
    );
  }
}

/** A method that communicates inside forward or backward needs a transport whose collectives can block. */
function refuseNonBlockingTransport(resolved: ResolvedConfig, computeCommunicator: boolean, method: string): void {
  const transport = getTransport(resolved.transport);
  if (computeCommunicator && !transport.blocking) {
    bad(
      'transport',
      `'${transport.name}' cannot complete a collective inside a forward or backward pass, ` +
        `which --method ${method} needs; use a transport that can (${DEFAULT_TRANSPORT})`,
    );
  }
}
