/**
 * Training configuration: the checks that run before any thread starts, and
 * the resolution of defaults into the form every thread receives (the shapes
 * are in config-types.ts).
 */
import os from 'node:os';
import { readFileSync } from 'node:fs';
import { TandemError } from './errors.js';
import { bad, finite, oneOf, shown } from './config-checks.js';
import { assertBackendAvailable, defaultBackend } from './engine/backend.js';
import { engineNames, getEngine } from './engine/engine-registry.js';
import { OPTIMIZER_KEYS, resolveOptimizer, type OptimizerFields } from './optim/resolve-optimizer.js';
import { SavedOptimizerProblem, savedOptimizerFields } from './optim/saved-optimizer.js';
import type { OptimizerConfig } from './optim/flat-optimizer.js';
import { ALL_REDUCE_KINDS } from './collectives/collective.js';
import { DEFAULT_TRANSPORT, getTransport, transportNames } from './collectives/transport-registry.js';
import { STRATEGIES, type StrategyOptions } from './pipeline/strategy.js';
import { parseLink, type LinkModel } from './pipeline/link-model.js';
import { DEFAULT_CHUNK_FLOATS, EXCHANGE_ORDERS, type ExchangeOrder } from './pipeline/priority-schedule.js';
import { resolveCommHook } from './pipeline/resolve-comm-hook.js';
import { BUILTIN_MODELS } from './model/builtin-models.js';
import { BUILTIN_DATASETS, isModulePath, resolveDataset, resolveModuleUrl } from './data/resolve-dataset.js';
import type { Dataset, DatasetSpec } from './data/dataset.js';
import { checkOptionsHonoured, probeFirstSample, probeHeldOut } from './data/dataset-checks.js';
import { classLabelProblem, singleClassProblem } from './data/class-labels.js';
import { inputScaleWarning } from './data/input-scale.js';
import { GlobalBatchSampler } from './data/sampler.js';
import { MNIST_META } from './data/mnist.js';
import { SYNTHETIC_DEFAULTS } from './data/synthetic-images.js';
import type { ModelSpec } from './model/resolve-model.js';
import { modelPathUrl } from './model/model-path.js';
import { getMethod } from './methods/method-registry.js';
import { loadPlugins } from './plugins/load-plugins.js';
import { worldSize } from './world/topology.js';
import { hostsTransport, resolveHosts } from './world/resolve-hosts.js';
import {
  FAULT_PHASES,
  LOSS_KINDS,
  isRegressionLoss,
  type ClassifierConfig,
  type LossKind,
  type ResolvedConfig,
  type TrainConfig,
} from './config-types.js';
import { useQuietCpu } from './engine/quiet-cpu.js';
import { sourcePath } from './source-path.js';
export { METHODS, FAULT_PHASES, LOSS_KINDS } from './config-types.js';
export type {
  ClassifierConfig,
  FaultInjection,
  LossKind,
  Method,
  ResolvedConfig,
  TrainConfig,
} from './config-types.js';

/** Steps between two replica checks (a digest of every replica's parameters, compared across devices and hosts). */
const DEFAULT_REPLICA_CHECK_EVERY = 100;
const KNOWN_KEYS = new Set([
  'hosts',
  'hostRank',
  'rendezvous',
  'checkpointEvery',
  'replicaCheckEvery',
  'checkpointDir',
  'keepCheckpoints',
  'stopGraceMs',
  'resume',
  'onNan',
  'evalSamples',
  'method',
  'embedding',
  'head',
  'scale',
  'margin',
  'sampleRate',
  'partition',
  'heldOut',
  'exportDevice',
  'exportClassifier',
  'model',
  'data',
  'devices',
  'backend',
  'nativeThreads',
  'nativeFusion',
  'batch',
  'steps',
  'epochs',
  'lr',
  'momentum',
  'optimizer',
  'beta1',
  'beta2',
  'epsilon',
  'rho',
  'decay',
  'centered',
  'nesterov',
  'initialAccumulatorValue',
  'seed',
  'strategy',
  'timeShare',
  'paramShare',
  'splitLayer',
  'bucketCapMB',
  'firstBucketMB',
  'link',
  'exchangeOrder',
  'chunkFloats',
  'trace',
  'allReduce',
  'localUpdate',
  'transport',
  'commHook',
  'commHookOptions',
  'batchNorm',
  'forwardWait',
  'loss',
  'plugins',
  'out',
  'classes',
  'imageSize',
  'datasetSize',
  'stallTimeoutMs',
  'loaderThreads',
  'faultInjection',
]);

/**
 * An option tandem does not know: a key written as a flag is (`checkpoint-every`, `held_out`, `heldout`) is named with
 * the option meant, which a --config file written from the flags gets wrong; any other with the list of options.
 */
function unknownOption(key: string): never {
  const camel = key.replace(/[-_]+([a-z0-9])/gi, (_, c: string) => c.toUpperCase());
  const meant = [...KNOWN_KEYS].find(k => k.toLowerCase() === camel.toLowerCase());
  if (meant)
    bad(
      key,
      `unknown option: did you mean ${meant}? (options, in a --config file too, are the API's camelCase names; the flags are kebab-case)`,
    );
  bad(key, `unknown option (known: ${[...KNOWN_KEYS].join(', ')})`);
}

function positiveInt(field: string, v: unknown, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max)
    bad(field, `must be an integer in [1, ${max}], got ${shown(v)}`);
  return v;
}

function nonNegativeInt(field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
    bad(field, `must be an integer >= 0 (0: off), got ${shown(v)}`);
  return v;
}

/** Validates everything that can be checked before threads start, and resolves defaults. */
export async function resolveConfig(config: TrainConfig): Promise<ResolvedConfig> {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    const found =
      config === null || config === undefined
        ? String(config)
        : Array.isArray(config)
          ? 'an array'
          : `${typeof config} ${shown(config)}`;
    throw new TandemError(
      'BAD_CONFIG',
      `config: expected an object of train options (e.g. { model: 'mlp', devices: 2 }), found ${found}`,
    );
  }
  for (const key of Object.keys(config)) if (!KNOWN_KEYS.has(key)) unknownOption(key);
  const plugins = pluginUrls(config.plugins);
  await loadPlugins(plugins); // before the names below are checked: plugins register transports, methods and engines
  const maxDevices = 64;
  const localDevices = positiveInt('devices', config.devices ?? 2, maxDevices);
  const { topology, rendezvous } = resolveHosts(config, localDevices);
  const devices = worldSize(topology); // replicas in the job: batch split, labels, mean
  const writer = topology.process === 0; // host 0 alone writes the model, summary, trace and checkpoints
  const backend = oneOf('backend', config.backend ?? defaultBackend(), engineNames());
  assertBackendAvailable(backend);
  const { capabilities } = getEngine(backend);
  if (capabilities.parameters !== 'host') {
    throw new TandemError(
      'BACKEND_UNAVAILABLE',
      `backend '${backend}' keeps parameters on the device, ` +
        "and tandem's device threads hand parameters and gradients over in host memory; use native, wasm, cpu or webgpu",
    );
  }
  const nativeThreads = positiveInt('nativeThreads', config.nativeThreads ?? 1, 256);
  const nativeFusion = config.nativeFusion ?? true;
  if (typeof nativeFusion !== 'boolean')
    bad('nativeFusion', `must be true or false, got ${JSON.stringify(nativeFusion)}`);
  const batch = positiveInt('batch', config.batch ?? 32);
  if (batch % devices !== 0)
    bad(
      'batch',
      `global batch ${batch} must be divisible by devices ${devices}${topology.processes > 1 ? ` (${topology.processes} hosts × ${localDevices})` : ''} (each device trains batch/devices samples); try ${Math.max(devices, batch - (batch % devices))}`,
    );
  const seed = config.seed ?? 1;
  if (!Number.isInteger(seed) || seed < 0) bad('seed', `must be a non-negative integer, got ${shown(seed)}`);
  const spec = config.strategy ?? 'sequential';
  let strategy: string;
  if (typeof spec === 'object' && spec !== null) {
    if (typeof spec.name !== 'string' || typeof spec.groups !== 'function')
      bad('strategy', 'a custom strategy needs a name and a groups(layout) function');
    strategy = spec.name;
  } else {
    strategy = oneOf('strategy', spec, [...STRATEGIES, 'auto'] as const);
  }
  const strategyOptions: StrategyOptions = {
    splitLayer: config.splitLayer === undefined ? undefined : positiveInt('splitLayer', config.splitLayer),
    bucketCapMB: finite('bucketCapMB', config.bucketCapMB ?? 0.5, 1e-6, 1e6),
    firstBucketMB: finite('firstBucketMB', config.firstBucketMB ?? 0.125, 1e-6, 1e6),
  };
  const exchange: ExchangeOrder =
    oneOf('exchangeOrder', config.exchangeOrder ?? 'ready', EXCHANGE_ORDERS) === 'priority'
      ? { order: 'priority', chunkFloats: positiveInt('chunkFloats', config.chunkFloats ?? DEFAULT_CHUNK_FLOATS) }
      : { order: 'ready' };
  if (exchange.order === 'ready' && config.chunkFloats !== undefined)
    bad('chunkFloats', "applies to exchangeOrder 'priority' only (--exchange-order priority)");
  let link: LinkModel | undefined;
  if (config.link !== undefined && config.link !== 'none') {
    if (typeof config.link !== 'string') bad('link', 'must be a string like 1gbps');
    link = parseLink(config.link);
  }
  if (config.timeShare !== undefined) finite('timeShare', config.timeShare, 0, 1);
  if (config.paramShare !== undefined) finite('paramShare', config.paramShare, 0, 1);
  if (config.trace !== undefined && (typeof config.trace !== 'string' || config.trace === ''))
    bad('trace', 'must be a file path');
  const allReduce = oneOf('allReduce', config.allReduce ?? 'sharded', ALL_REDUCE_KINDS);
  if (config.transport !== undefined && (typeof config.transport !== 'string' || config.transport === ''))
    bad('transport', 'must be the name of a registered transport');
  const transport = getTransport(
    config.transport ??
      (topology.processes > 1 && rendezvous
        ? hostsTransport(topology.localDevices, rendezvous, name => transportNames().includes(name))
        : DEFAULT_TRANSPORT),
  );
  if (config.commHook === 'auto' && config.strategy !== 'auto')
    bad('commHook', "'auto' (let --strategy auto pick a hook) needs strategy 'auto'");
  const commHook =
    config.commHook === 'auto' ? undefined : await resolveCommHook(config.commHook, config.commHookOptions); // auto: options checked once a hook is picked
  const stallTimeoutMs = finite('stallTimeoutMs', config.stallTimeoutMs ?? 120_000, 100, 24 * 3600_000);
  const loaderThreads = positiveInt(
    'loaderThreads',
    config.loaderThreads ?? Math.min(2, Math.max(1, os.availableParallelism() - 1)),
    16,
  );

  // Model and data: names first, then shapes.
  const modelSource = config.model ?? 'mlp';
  if (typeof modelSource !== 'string' || modelSource === '') bad('model', 'must be a builtin name or a module path');
  const builtinModel = BUILTIN_MODELS[modelSource];
  const modelUrl = builtinModel ? undefined : modelPathUrl(modelSource);
  if (!builtinModel && !modelUrl) {
    throw new TandemError(
      'UNKNOWN_MODEL',
      `config.model: unknown model '${modelSource}'. Builtins: ${Object.keys(BUILTIN_MODELS).join(', ')}; ` +
        'or a path to an ES module or a TensorFlow.js layers model.json.',
    );
  }
  const trainingConfig = savedTrainingConfig(modelUrl ?? modelSource); // a saved model.json's compiled optimizer and loss
  const optimizer = optimizerOf(config, modelUrl ?? modelSource, trainingConfig?.optimizer_config);
  const dataSource = config.data ?? 'mnist';
  if (typeof dataSource !== 'string' || dataSource === '') bad('data', 'must be a builtin name or a module path');
  if (!(BUILTIN_DATASETS as readonly string[]).includes(dataSource)) {
    if (!isModulePath(dataSource)) {
      throw new TandemError(
        'UNKNOWN_DATASET',
        `config.data: unknown dataset '${dataSource}'. Builtins: ${BUILTIN_DATASETS.join(', ')}; or a path to an ES module.`,
      );
    }
    resolveModuleUrl(dataSource, 'data');
  }

  let imageShape: number[] | undefined;
  if (config.imageSize !== undefined) {
    const s = config.imageSize;
    if (!Array.isArray(s) || (s.length !== 2 && s.length !== 3) || s.some(v => !Number.isInteger(v) || v < 1))
      bad('imageSize', 'must be [height, width] or [height, width, channels] of positive integers');
    imageShape = s.length === 2 ? [s[0], s[1], 3] : [...s];
  }
  if (config.classes !== undefined) positiveInt('classes', config.classes, 10_000_000);
  if (config.datasetSize !== undefined) positiveInt('datasetSize', config.datasetSize);

  let data: DatasetSpec;
  let meta: { size: number; sampleShape: readonly number[]; classes: number };
  let firstLabel: number | undefined; // a data module's sample 0: its label or target
  let userDataset: Dataset | undefined;
  if (dataSource === 'mnist') {
    if (config.classes !== undefined && config.classes !== 10) bad('classes', 'mnist has 10 classes');
    if (imageShape) bad('imageSize', 'mnist images are 28x28x1; imageSize applies to synthetic-images');
    data = { source: 'mnist', options: { seed } };
    meta = MNIST_META;
  } else if (dataSource === 'synthetic-images') {
    const shape = imageShape ?? builtinModel?.preferredInputShape ?? [...SYNTHETIC_DEFAULTS.imageShape];
    data = {
      source: dataSource,
      options: {
        seed,
        classes: config.classes ?? SYNTHETIC_DEFAULTS.classes,
        imageShape: shape,
        size: config.datasetSize ?? SYNTHETIC_DEFAULTS.size,
      },
    };
    meta = { size: data.options.size as number, sampleShape: shape, classes: data.options.classes as number };
  } else {
    data = {
      source: resolveModuleUrl(dataSource, 'data'),
      options: { seed, classes: config.classes, imageShape, size: config.datasetSize },
    };
    const ds = (userDataset = await resolveDataset(data));
    checkOptionsHonoured(ds, config, sourcePath(data.source));
    firstLabel = probeFirstSample(ds, data.source);
    meta = { size: ds.size, sampleShape: ds.sampleShape, classes: ds.classes };
  }
  const sampleShape = [...meta.sampleShape];
  const method = getMethod(config.method ?? 'data-parallel');
  const heldOut = config.heldOut ?? method.defaultHeldOut(meta.size);
  if (!Number.isInteger(heldOut) || heldOut < 0 || heldOut >= meta.size)
    bad('heldOut', `must be an integer in [0, ${meta.size}), got ${shown(heldOut)}`);
  const trainSize = meta.size - heldOut;
  const evalSamples = evalSamplesOf(config.evalSamples, heldOut, config.heldOut === undefined);
  if (trainSize < batch)
    bad(
      'batch',
      `global batch ${batch} is larger than the training samples (${trainSize} of ${meta.size}; ${heldOut} held out): ${smallerBatch(trainSize, devices, heldOut)}`,
    );
  const classifier: ClassifierConfig | undefined = method.resolveOptions(config, { classes: meta.classes, devices });

  const minImage = builtinModel?.minImageSize;
  if (minImage !== undefined) {
    const [h, w] = sampleShape;
    if (sampleShape.length !== 3 || h < minImage || w < minImage) {
      throw new TandemError(
        'SHAPE_MISMATCH',
        `model '${modelSource}' needs images [height, width, channels] of at least ${minImage}x${minImage}; ` +
          `data '${dataSource}' gives samples of shape [${sampleShape.join(', ')}]. Use --model mlp (any sample shape), a model module of your own, ` +
          'or, with synthetic-images, a larger --image-size.',
      );
    }
  }
  // The classifier methods build the model as a feature extractor: its output is the embedding.
  const outputs = classifier ? classifier.embedding : meta.classes;
  const model: ModelSpec = {
    source: modelUrl ?? modelSource,
    options: { inputShape: sampleShape, classes: outputs, seed },
  };
  const loss = resolveLoss(config.loss, model.source, trainingConfig?.loss, method.name, dataSource, meta.classes);
  if (!isRegressionLoss(loss)) {
    const single = singleClassProblem(meta.classes);
    if (single && dataSource === 'synthetic-images') {
      bad(
        'classes',
        `a classifier needs 2 or more classes (one-hot labels over one class train nothing), and data '${dataSource}' has ${meta.classes}; give --classes 2 or more`,
      );
    }
    if (single) bad('loss', `data '${dataSource}' has 1 class${loss ? ` and loss is ${loss}` : ''}: ${single}`);
    const problem = firstLabel === undefined ? undefined : classLabelProblem(firstLabel, meta.classes);
    if (problem)
      throw new TandemError(
        'BAD_DATA',
        `data module ${dataSource}: read(0, out, offset) returned label ${firstLabel}, ${problem}`,
      );
    if (userDataset) probeHeldOut(userDataset, trainSize, Math.min(meta.size, trainSize + evalSamples), data.source);
  }
  if (builtinModel && isRegressionLoss(loss))
    bad(
      'loss',
      `${loss} (regression) needs a model with one output; builtin '${modelSource}' outputs one score per class`,
    );
  if (!builtinModel) await checkModuleModelShapes(model, sampleShape, outputs, modelSource, dataSource, loss);

  const stepsPerEpoch = Math.floor(trainSize / batch);
  if (config.steps !== undefined && config.epochs !== undefined) bad('steps', 'give steps or epochs, not both');
  const steps =
    config.epochs !== undefined
      ? positiveInt('epochs', config.epochs, 1_000_000) * stepsPerEpoch
      : positiveInt('steps', config.steps ?? stepsPerEpoch);

  const fi = config.faultInjection;
  if (fi !== undefined) {
    positiveInt('faultInjection.step', fi.step);
    if (!Number.isInteger(fi.device) || fi.device < 0 || fi.device >= devices)
      bad('faultInjection.device', `must be in [0, ${devices})`);
    oneOf('faultInjection.phase', fi.phase, FAULT_PHASES);
    oneOf('faultInjection.kind', fi.kind, ['throw', 'exit', 'hang', 'nan', 'perturb'] as const);
    if (fi.kind === 'nan' && fi.phase !== 'forward')
      bad('faultInjection.kind', "'nan' is injected in the forward pass only");
    if (fi.kind === 'perturb' && fi.phase !== 'update')
      bad('faultInjection.kind', "'perturb' is injected in the update only");
  }
  if (config.out !== undefined && (typeof config.out !== 'string' || config.out === ''))
    bad('out', 'must be a directory path');
  const inputWarning =
    userDataset && writer // host 0 says it once for the job
      ? inputScaleWarning(
          userDataset,
          new GlobalBatchSampler(trainSize, batch, seed, devices).batchIndices(1),
          data.source,
        )
      : undefined;

  const resolved: ResolvedConfig = {
    onNan: oneOf('onNan', config.onNan ?? 'error', ['error', 'skip-step'] as const),
    ...checkpointOptions(config, writer),
    replicaCheckEvery:
      config.replicaCheckEvery === undefined
        ? DEFAULT_REPLICA_CHECK_EVERY
        : nonNegativeInt('replicaCheckEvery', config.replicaCheckEvery),
    method: method.name,
    classifier,
    trainSize,
    evalSamples,
    inputWarning,
    model,
    data,
    datasetSize: meta.size,
    sampleShape,
    classes: meta.classes,
    devices,
    topology,
    rendezvous,
    backend,
    nativeThreads,
    nativeFusion,
    batch,
    perDevice: batch / devices,
    steps,
    stepsPerEpoch,
    optimizer,
    seed,
    strategy,
    strategyOptions,
    exchange,
    link,
    trace: writer ? config.trace : undefined,
    allReduce,
    localUpdate: oneOf('localUpdate', config.localUpdate ?? 'replica', ['shard', 'replica'] as const),
    transport: transport.name,
    commHook,
    loss,
    batchNorm: oneOf('batchNorm', config.batchNorm ?? 'sync', ['sync', 'local'] as const),
    forwardWait: oneOf('forwardWait', config.forwardWait ?? 'group', ['group', 'step'] as const),
    plugins,
    out: writer ? config.out : undefined,
    stallTimeoutMs,
    loaderThreads,
    faultInjection: fi,
  };
  if (method.computeCommunicator(resolved) && !transport.blocking) {
    bad(
      'transport',
      `'${transport.name}' cannot complete a collective inside a forward or backward pass, which --method ${method.name} needs; ` +
        `use a transport that can (${DEFAULT_TRANSPORT})`,
    );
  }
  if (!shardedUpdateApplies(resolved)) resolved.localUpdate = 'replica';
  return resolved;
}

/**
 * Whether one process's devices can update by shards (localUpdate 'shard', the comm worker's reduce-scatter): several
 * devices of one process on the in-process shared-memory transport, the sharded all-reduce, no comm hook (it
 * exchanges whole groups), the ready order (priority exchanges chunks), `onNan: 'error'` (a device sees only its
 * shard's gradient, so it could not skip the whole step).
 */
function shardedUpdateApplies(r: ResolvedConfig): boolean {
  return (
    r.topology.processes === 1 &&
    r.topology.localDevices > 1 &&
    r.transport === 'shared-memory' &&
    r.allReduce === 'sharded' &&
    !r.commHook &&
    r.exchange.order === 'ready' &&
    r.onNan === 'error'
  );
}

function pluginUrls(plugins: unknown): string[] {
  if (plugins === undefined) return [];
  if (!Array.isArray(plugins) || plugins.some(p => typeof p !== 'string' || p === ''))
    bad('plugins', 'must be a list of ES module paths');
  return (plugins as string[]).map(p => resolveModuleUrl(p, 'plugins'));
}

/**
 * The loss the config names, else the one a saved model.json (`source`) was compiled with (`savedLossEntry`, its
 * trainingConfig's), else undefined (read from the output).
 */
function resolveLoss(
  given: unknown,
  source: string,
  savedLossEntry: unknown,
  method: string,
  dataSource: string,
  classes: number,
): LossKind | undefined {
  const loss = given === undefined ? savedLoss(source, savedLossEntry) : oneOf('loss', given, LOSS_KINDS);
  if (loss === undefined) return undefined;
  if (method !== 'data-parallel' && loss !== 'categorical')
    bad(
      'loss',
      `--method ${method} trains a classifier head with categorical cross-entropy; '${loss}' applies to data-parallel`,
    );
  if (isRegressionLoss(loss) && (BUILTIN_DATASETS as readonly string[]).includes(dataSource)) {
    bad(
      'loss',
      `${loss} (regression) needs float targets: a data module whose read(index, out, offset) returns the target; '${dataSource}' has class labels`,
    );
  }
  if (loss === 'binary' && classes !== 2)
    bad('loss', `binary cross-entropy needs two classes; the data has ${classes}`);
  return loss;
}

/** A saved model.json's trainingConfig (written when a compiled model is saved with its optimizer), if any. */
function savedTrainingConfig(source: string): { loss?: unknown; optimizer_config?: unknown } | undefined {
  if (!source.endsWith('.json')) return undefined;
  try {
    return (
      JSON.parse(readFileSync(sourcePath(source), 'utf8')) as {
        trainingConfig?: { loss?: unknown; optimizer_config?: unknown };
      }
    ).trainingConfig;
  } catch {
    return undefined; // the model loader reports an unreadable model.json
  }
}

/**
 * The optimizer of `config`: the one it names, else the one a saved model.json (`source`) was compiled with
 * (`savedOptimizerConfig`, its trainingConfig's), the config's own hyper-parameters over the saved ones
 * (saved-optimizer.ts); a refusal then names the file.
 */
function optimizerOf(config: TrainConfig, source: string, savedOptimizerConfig: unknown): OptimizerConfig {
  if (config.optimizer !== undefined) return resolveOptimizer(config);
  let saved: OptimizerFields | undefined;
  try {
    saved = savedOptimizerFields(savedOptimizerConfig);
  } catch (err) {
    if (!(err instanceof SavedOptimizerProblem)) throw err;
    bad(
      'optimizer',
      `${sourcePath(source)} was compiled with ${err.message}: give optimizer (--optimizer) to train with one tandem has`,
    );
  }
  if (!saved) return resolveOptimizer(config);
  const given = Object.fromEntries(Object.entries(config).filter(([k, v]) => v !== undefined && OPTIMIZER_KEYS.has(k)));
  try {
    return resolveOptimizer({ ...saved, ...given });
  } catch (err) {
    if (!(err instanceof TandemError)) throw err;
    throw new TandemError(
      err.code,
      `${err.message} (${saved.optimizer}: the optimizer ${sourcePath(source)} was compiled with; give optimizer (--optimizer) to choose another)`,
    );
  }
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

/** Builds a user module's model once on this thread (cpu backend) to check it against the data. */
async function checkModuleModelShapes(
  spec: ModelSpec,
  sampleShape: number[],
  classes: number,
  modelSource: string,
  dataSource: string,
  loss?: LossKind,
): Promise<void> {
  const tf = await import('@tensorflow/tfjs');
  const { buildModel } = await import('./model/resolve-model.js');
  const { assertTrainable } = await import('./model/trainability.js');
  await useQuietCpu(tf);
  const model = await buildModel(tf, spec);
  try {
    if (model.inputs.length !== 1 || model.outputs.length !== 1) {
      throw new TandemError(
        'SHAPE_MISMATCH',
        `model '${modelSource}' has ${model.inputs.length} inputs and ${model.outputs.length} outputs; tandem trains ` +
          "models with one input (the data's sample) and one output (the loss's). Concatenate inputs in the data module, or train each output as its own model",
      );
    }
    const input = model.inputs[0].shape.slice(1);
    const output = model.outputs[0].shape.slice(1);
    const fits = input.length === sampleShape.length && input.every((d, i) => d === null || d === sampleShape[i]);
    if (!fits) {
      throw new TandemError(
        'SHAPE_MISMATCH',
        `model '${modelSource}' takes inputs of shape [${input.join(', ')}] but data '${dataSource}' gives [${sampleShape.join(', ')}]`,
      );
    }
    const binary = classes === 2 && output[0] === 1; // one score (sigmoid or logit) for two classes
    if (isRegressionLoss(loss) && (output.length !== 1 || output[0] !== 1)) {
      throw new TandemError(
        'SHAPE_MISMATCH',
        `model '${modelSource}' outputs shape [${output.join(', ')}]; loss ${loss} trains one output against one float target per sample`,
      );
    }
    if (!isRegressionLoss(loss) && (output.length !== 1 || (output[0] !== classes && !binary))) {
      throw new TandemError(
        'SHAPE_MISMATCH',
        `model '${modelSource}' outputs shape [${output.join(', ')}] but data '${dataSource}' has ${classes} classes ` +
          `(give ${classes} outputs${classes === 2 ? ', or 1 for binary cross-entropy' : ''})`,
      );
    }
    assertTrainable(tf, model, sampleShape, modelSource);
  } finally {
    model.dispose();
  }
}

/** `writer`: this process writes checkpoints (host 0; every other host writes nothing). */
function checkpointOptions(
  config: TrainConfig,
  writer: boolean,
): Pick<ResolvedConfig, 'checkpointEvery' | 'checkpointDir' | 'resume' | 'keepCheckpoints' | 'stopGraceMs'> {
  const every =
    config.checkpointEvery === undefined ? undefined : positiveInt('checkpointEvery', config.checkpointEvery);
  for (const k of ['checkpointDir', 'resume'] as const) {
    if (config[k] !== undefined && (typeof config[k] !== 'string' || config[k] === '')) bad(k, 'must be a path');
  }
  if (every !== undefined && config.checkpointDir === undefined && config.out === undefined) {
    bad('checkpointEvery', 'needs a place for the checkpoints: give checkpointDir or out');
  }
  const keep = config.keepCheckpoints ?? 3;
  if (!Number.isInteger(keep) || keep < 0)
    bad('keepCheckpoints', `must be an integer >= 0 (0 keeps every checkpoint), got ${shown(keep)}`);
  const stopGraceMs = finite('stopGraceMs', config.stopGraceMs ?? 5000, 0, 24 * 3600_000);
  return {
    checkpointEvery: every,
    checkpointDir: writer ? config.checkpointDir : undefined,
    resume: config.resume,
    keepCheckpoints: keep,
    stopGraceMs,
  };
}

/**
 * The held-out samples to evaluate: `given` (config.evalSamples) if the held-out range has that many, else refused
 * before training (it evaluated the `heldOut` there were, or nothing, without a word); the default, 2000, is capped
 * at `heldOut` silently. `heldOutDefault`: heldOut was not given (the method's default).
 */
function evalSamplesOf(given: unknown, heldOut: number, heldOutDefault: boolean): number {
  if (given === undefined) return 2000;
  const n = positiveInt('evalSamples', given);
  const source = heldOutDefault ? `the method's default heldOut is ${heldOut}` : `heldOut is ${heldOut}`;
  if (heldOut === 0) {
    bad(
      'evalSamples',
      `evaluates ${n} held-out samples, but none are held out (${source}): hold out samples for it with heldOut ${n} ` +
        `(--held-out ${n}: the last ${n} samples, which then are not trained on), or leave evalSamples out`,
    );
  }
  if (n > heldOut) {
    bad(
      'evalSamples',
      `${n} is more than the ${heldOut} held-out samples (${source}): give evalSamples ${heldOut} or fewer ` +
        `(--eval-samples ${heldOut}), or hold out more with heldOut ${n} (--held-out ${n})`,
    );
  }
  return n;
}

/** The way out of a batch larger than the `trainSize` training samples, over `devices` devices. */
function smallerBatch(trainSize: number, devices: number, heldOut: number): string {
  const fewer = heldOut > 0 ? ', or hold out fewer (--held-out)' : '';
  if (trainSize < devices)
    return `every device needs at least one sample per step: use more data, or fewer than ${devices} devices${fewer}`;
  return `give a batch of at most ${trainSize - (trainSize % devices)} (a multiple of the ${devices} device(s))${fewer}, or use more data`;
}
