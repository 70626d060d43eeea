/**
 * The shapes of a training configuration: what the user gives (`TrainConfig`, the sections each part declares with
 * its options) and the resolved form every thread receives (`ResolvedConfig`). Types only, so that every layer can
 * name them without importing the checks.
 */
import type { BackendName } from './engine/backend.js';
import type { Precision } from './engine/engine-options.js';
import type { OptimizerConfig } from './optim/flat-optimizer.js';
import type { AllReduceKind } from './collectives/collective.js';
import type { StrategyOptions } from './pipeline/strategy.js';
import type { ExchangeOrder } from './pipeline/priority-schedule.js';
import type { LinkModel } from './pipeline/link-model.js';
import type { DatasetSpec } from './data/dataset.js';
import type { ModelSpec } from './model/resolve-model.js';
import type { HeadKind } from './classifier/classifier-head.js';
import type { ModelSection } from './model/model-options.js';
import type { DataOptions } from './data/data-options.js';
import type { EpochLogsConfig, ValidationOptions } from './data/validation-options.js';
import type { WorldOptions } from './world/world-options.js';
import type { EngineOptions } from './engine/engine-options.js';
import type { OptimizerFields } from './optim/optimizer-options.js';
import type { LrScheduleOptions } from './optim/lr-schedule-options.js';
import type { LrSchedule } from './optim/lr-schedule.js';
import type { ScheduleOptions } from './pipeline/schedule-options.js';
import type { CommHookSection } from './pipeline/comm-hook-options.js';
import type { ClassifierOptions, Method, MethodSection } from './methods/method-options.js';
import type { CheckpointOptions } from './checkpoint/checkpoint-options.js';
import type { OutputOptions } from './output/output-options.js';
import type { ReliabilityOptions } from './monitor/reliability-options.js';
import type { TensorBoardOptions } from './monitor/tensorboard-options.js';
import type { DashboardOptions } from './monitor/dashboard-options.js';
import type { PluginOptions } from './plugins/plugin-options.js';
import type { PluginValues } from './plugins/step-probes.js';
import type { Topology } from './world/topology.js';
import type { Rendezvous } from './world/rendezvous.js';
import type { ResolvedCommHook } from './pipeline/resolve-comm-hook.js';

export {
  LOSS_KINDS,
  REGRESSION_LOSS_KINDS,
  isRegressionLoss,
  type LossKind,
  type RegressionLossKind,
} from './model/loss-kinds.js';
import type { LossKind } from './model/loss-kinds.js';

export { METHODS, type Method } from './methods/method-options.js';

/** Method B (local-head) and the Partial FC comparison mode. */
export interface ClassifierConfig {
  embedding: number;
  head: HeadKind;
  scale: number;
  margin: number;
  /** partial-fc: share of each device's class centres in a step's softmax (positives always in). */
  sampleRate: number;
  /** partition[d] = labels device d owns. */
  partition: number[][];
  exportDevice: number;
  exportClassifier: boolean;
}

/**
 * What the user gives: the sections, each declared once by the part that reads it (an `OptionTable` beside it).
 * The keys are flat: the library API, config files and flags spell them as before.
 */
export type TrainConfig = ModelSection &
  DataOptions &
  ValidationOptions &
  WorldOptions &
  EngineOptions &
  OptimizerFields &
  LrScheduleOptions &
  ScheduleOptions &
  CommHookSection &
  MethodSection &
  ClassifierOptions &
  CheckpointOptions &
  OutputOptions &
  TensorBoardOptions &
  DashboardOptions &
  ReliabilityOptions &
  PluginOptions;

export interface ResolvedConfig {
  method: Method;
  classifier?: ClassifierConfig;
  /** Samples [0, trainSize) train; [trainSize, datasetSize) are held out. */
  trainSize: number;
  /** Each epoch a seeded permutation of the training samples; false: in their order. */
  shuffle: boolean;
  /** Each epoch's last, smaller batch is trained (stepsPerEpoch = ceil(trainSize / batch)); else dropped. */
  partialBatch: boolean;
  /**
   * A data module's image inputs far outside the usual range (data/input-scale.ts): the run warns with it once, on host
   * 0.
   */
  inputWarning?: string;
  /** What an image folder's listing found to say (data/image-files.ts's listingNotes): host 0 warns with it once. */
  dataWarnings?: string[];
  evalSamples: number;
  /** Validation every epoch, early stopping, the best epochs kept (config/epoch-logs-config.ts); absent: none. */
  epochLogs?: EpochLogsConfig;
  onNan: 'error' | 'skip-step';
  checkpointEvery?: number;
  /** 0: off. */
  replicaCheckEvery: number;
  checkpointDir?: string;
  keepCheckpoints: number;
  stopGraceMs: number;
  resume?: string;
  model: ModelSpec;
  data: DatasetSpec;
  datasetSize: number;
  sampleShape: number[];
  classes: number;
  /** The classes' names in label order, when the dataset gives them (an image folder, a CSV): --out's labels.json. */
  classNames?: readonly string[];
  /**
   * The shape of one sample's target when the data's targets are tensors (the dataset's `targetShape`): the loss is
   * computed on the whole target (model/target-loss.ts). Absent: one label or float target per sample.
   */
  targetShape?: number[];
  /** Replicas in the job (the world size: processes × local devices). */
  devices: number;
  /** Processes × local devices, and this process's rank. */
  topology: Topology;
  /** Several hosts: where host 0 serves the store. */
  rendezvous?: Rendezvous;
  backend: BackendName;
  nativeThreads: number;
  nativeFusion: boolean;
  /** What convolutions and matmuls multiply in (engine option `precision`). */
  precision: Precision;
  batch: number;
  perDevice: number;
  /** Micro-batches per step on each device (1: none), each of perDevice / accumulate samples. */
  accumulate: number;
  steps: number;
  stepsPerEpoch: number;
  optimizer: OptimizerConfig;
  /**
   * The model.json whose saved optimizer state (its weights of group 'optimizer') the optimizer starts from, counting
   * on from its iterations (`optimizer.stepsBefore`): config/saved-model.ts.
   */
  optimizerStateFrom?: string;
  /** Why a saved optimizer state is not taken up: host 0 warns with it once. */
  optimizerWarning?: string;
  /** The learning rate of each step (optim/lr-schedule.ts); absent: `optimizer.lr` throughout. */
  lrSchedule?: LrSchedule;
  seed: number;
  /** The strategy's name (a custom strategy's groups are computed on the main thread). */
  strategy: string;
  strategyOptions: StrategyOptions;
  exchange: ExchangeOrder;
  link?: LinkModel;
  trace?: string;
  allReduce: AllReduceKind;
  localUpdate: 'shard' | 'replica';
  transport: string;
  /** The communication hook; absent: the plain all-reduce. */
  commHook?: ResolvedCommHook;
  batchNorm: 'sync' | 'local';
  forwardWait: 'group' | 'step';
  /**
   * The loss, when the config or a saved model's trainingConfig names one (else read from the model's output on each
   * device).
   */
  loss?: LossKind;
  /** A classifier's weight per class id (tfjs's classWeight); absent: every sample weighs 1. */
  classWeight?: number[];
  /** tfjs metric functions computed each step on targets of a shape (model/metric-values.ts); absent: none. */
  metrics?: string[];
  /** Plugin module URLs (file:), loaded by every thread. */
  plugins: string[];
  out?: string;
  /** Replace a finished run's results in `out` (claim-outputs.ts). */
  overwrite?: boolean;
  stallTimeoutMs: number;
  loaderThreads: number;
  /**
   * The values of the options plugins declared (`registerOptions`), by key: every thread receives them (a plugin's
   * step probes read theirs here).
   */
  pluginOptions: PluginValues;
}
