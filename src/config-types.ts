/**
 * The shapes of a training configuration: what the user gives (`TrainConfig`)
 * and the resolved form every thread receives (`ResolvedConfig`). Types only,
 * so that every layer can name them without importing the checks.
 */
import type { BackendName } from './engine/backend.js';
import type { OptimizerConfig, OptimizerName } from './optim/flat-optimizer.js';
import type { AllReduceKind } from './collectives/collective.js';
import type { StrategyOptions, StrategySpec } from './pipeline/strategy.js';
import type { ExchangeOrder } from './pipeline/priority-schedule.js';
import type { LinkModel } from './pipeline/link-model.js';
import type { DatasetSpec } from './data/dataset.js';
import type { ModelSpec } from './model/resolve-model.js';
import type { HeadKind } from './classifier/classifier-head.js';
import type { Topology } from './world/topology.js';
import type { Rendezvous } from './world/rendezvous.js';
import type { CommHookOptions } from './pipeline/comm-hook.js';
import type { ResolvedCommHook } from './pipeline/resolve-comm-hook.js';

export {
  LOSS_KINDS,
  REGRESSION_LOSS_KINDS,
  isRegressionLoss,
  type LossKind,
  type RegressionLossKind,
} from './model/loss-kinds.js';
import type { LossKind } from './model/loss-kinds.js';

/** The built-in training methods (more can be registered: see methods/method-registry.ts). */
export const METHODS = ['data-parallel', 'local-head', 'partial-fc'] as const;
export type Method = (typeof METHODS)[number] | (string & {});

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

export const FAULT_PHASES = ['load', 'forward', 'backward', 'exchange', 'update'] as const;
/** Test hook: make one device fail at one step and phase. */
export interface FaultInjection {
  device: number;
  step: number;
  phase: (typeof FAULT_PHASES)[number];
  /**
   * throw an exception, exit the thread, hang (a busy loop that never returns), (forward only) make the output NaN, or
   * (update only) `perturb`: move the device's first parameter of group 0 by 0.01 after its update, a replica
   * that silently diverges (what the replica check, `replicaCheckEvery`, must catch).
   */
  kind: 'throw' | 'exit' | 'hang' | 'nan' | 'perturb';
}

export interface TrainConfig {
  /** `data-parallel` (default), `local-head` (method B: each device owns a share of the labels), `partial-fc`. */
  method?: Method;
  /** Method B / partial-fc: embedding size the model outputs (its factory gets classes = embedding). Default 128. */
  embedding?: number;
  head?: HeadKind;
  /** cosine head: scale s (default 30) and additive angular margin in radians (default 0). */
  scale?: number;
  margin?: number;
  sampleRate?: number;
  /** A user label partition: one list of labels per device. Default: contiguous shares. */
  partition?: number[][];
  /** Samples held out at the end of the dataset for evaluation. Default 10% for the classifier methods, else 0. */
  heldOut?: number;
  exportDevice?: number;
  exportClassifier?: boolean;
  /**
   * A non-finite gradient: `error` (default) fails the run naming the first offending variable, before it is
   * handed over; `skip-step` hands it over and every device skips the update of each group whose averaged
   * gradient is non-finite (identically everywhere; with overlapped strategies a group already applied in
   * that step stays applied), with a warning naming the first offending variable.
   */
  onNan?: 'error' | 'skip-step';
  /** Held-out samples evaluated after training (the first of the held-out range). Default 2000. */
  evalSamples?: number;
  /** Write a checkpoint every K steps (and when stopped). */
  checkpointEvery?: number;
  /**
   * Compare a digest of every replica's parameter bits (every device of every host) every K steps; a difference ends
   * the run on every host with REPLICA_DIVERGED. Default 100; 0 turns it off.
   */
  replicaCheckEvery?: number;
  /** Where checkpoints go. Default: `out`. */
  checkpointDir?: string;
  /** Keep only the K newest checkpoints of the checkpoint directory (older ones are removed after each write). Default 3; 0 keeps all. */
  keepCheckpoints?: number;
  /**
   * After `stop()` (the CLI: a first SIGINT/SIGTERM/SIGHUP), how long the step in flight may take to finish and reach its stop
   * checkpoint; past it the run is aborted as by `abort()` (a second signal). Default 5000.
   */
  stopGraceMs?: number;
  /** Continue from the latest checkpoint in this directory (or this checkpoint file). `steps` counts from the start of the run. */
  resume?: string;
  /** Builtin model name or path to an ES module `(tf, options) => tf.LayersModel`. Default `mlp`. */
  model?: string;
  /** Builtin dataset name or path to an ES module `(options) => Dataset`. Default `mnist`. */
  data?: string;
  /** Devices per host (the world is hosts × devices). Default 2. */
  devices?: number;
  /** Processes (hosts) in the job, each with `devices` devices. Default 1. */
  hosts?: number;
  /** This process's rank among the hosts, in [0, hosts). Host 0 serves the rendezvous store and alone writes outputs. */
  hostRank?: number;
  /** hosts > 1: `HOST:PORT` where host 0 serves the store every rank meets at. */
  rendezvous?: string;
  /** Default: `native` when the oneDNN addon was built, else `wasm` (env `TANDEM_BACKEND` overrides the default). */
  backend?: BackendName;
  /** OpenMP threads per device for the native backend. Default 1 (one core per device). */
  nativeThreads?: number;
  /**
   * Native backend: run each Conv2D layer (relu or linear, channels-last, dilation 1) as one fused
   * kernel — convolution + bias + activation — in training. Default true (`--no-native-fusion` turns it off).
   */
  nativeFusion?: boolean;
  /** Global batch size: each device trains on batch / devices samples per step. */
  batch?: number;
  steps?: number;
  epochs?: number;
  /** Default: tf.train's own (adam 0.001, adamax 0.002, adadelta 0.001), else tfjs-layers' (sgd, momentum, adagrad 0.01; rmsprop 0.001). */
  lr?: number;
  /** sgd and momentum (default 0.9), rmsprop (default 0). */
  momentum?: number;
  /** tfjs's optimizers: `momentum` is sgd with momentum. Each takes only its own hyper-parameters below; another is refused. */
  optimizer?: OptimizerName;
  /** adam, adamax: default 0.9. */
  beta1?: number;
  /** adam, adamax: default 0.999. */
  beta2?: number;
  /** adam, rmsprop, adamax, adadelta: default 1e-7 (tfjs's, on a float32 backend). */
  epsilon?: number;
  /** adadelta: the decay of its accumulators, default 0.95. */
  rho?: number;
  /** rmsprop: the decay of the mean square, default 0.9 (keras's rho); adamax: of the learning rate, lr / (1 + decay × iteration), default 0. */
  decay?: number;
  /** rmsprop: divide by the estimated variance instead of the mean square. Default false. */
  centered?: boolean;
  /** sgd/momentum with momentum > 0: Nesterov's look-ahead (tfjs's `useNesterov`). Default false. */
  nesterov?: boolean;
  /** adagrad: the accumulator's value before the first step, default 0.1. */
  initialAccumulatorValue?: number;
  seed?: number;
  /** A built-in strategy name, `auto`, or a `CustomStrategy` (library API only). Default `sequential`. */
  strategy?: StrategySpec | 'auto';
  /** `auto` (profile, then decide): the AlexNet-like conditions. Defaults 0.25 and 0.25. */
  timeShare?: number;
  paramShare?: number;
  /** two-group: number of layers (transmission order) in the FC group. */
  splitLayer?: number;
  /** buckets: bucket cap and first-bucket cap in MB. */
  bucketCapMB?: number;
  firstBucketMB?: number;
  /** EMULATED link between devices, e.g. `1gbps` or `10gbps:0.05ms`. */
  link?: string;
  /**
   * How the comm thread orders a step's exchanges: `ready` (default: one group after the other, as they become ready) or
   * `priority` (each group's all-reduce in chunks of `chunkFloats`; between chunks a group forward needs earlier
   * overtakes; the same parameters, bit for bit). See pipeline/priority-schedule.ts.
   */
  exchangeOrder?: 'ready' | 'priority';
  /** `priority`: floats per chunk of a group's all-reduce. Default 1048576 (4 MiB). */
  chunkFloats?: number;
  /** Write a Chrome trace (Perfetto / chrome://tracing) of the run here. */
  trace?: string;
  allReduce?: AllReduceKind;
  /**
   * Who updates the parameters of one process's devices: `replica` (default) — each device all-reduces the whole
   * group and updates its own replica; `shard` — each device's comm thread reduces 1/N of a group's gradient, updates
   * that 1/N of the parameters and optimizer state once, and writes it into every replica (shared memory: no gather of
   * the gradient, 1/N of the update per thread). The same bits either way; `shard` measured no faster on 2 cores
   * (README, Scaling). `shard` applies with the in-process `shared-memory` transport, the `sharded` all-reduce, no comm
   * hook, the `ready` exchange order and `onNan: 'error'`; elsewhere the run updates per replica.
   */
  localUpdate?: 'shard' | 'replica';
  /** How the devices' collectives reach each other: a registered transport. Default `shared-memory`; several hosts: `shm` when the rendezvous is a loopback address (one machine), else `hierarchical` (`gloo` with one device per host). */
  transport?: string;
  /**
   * What replaces the all-reduce of each exchange group: `fp16`, `bf16`, `powersgd`, a hook registered by a plugin, or a module
   * path whose default export is a hook (see comm-hook.ts). Default none: the plain all-reduce, bit for bit.
   */
  commHook?: string;
  /** Options of the hook: errorFeedback, rank, startStep, warmStart, minCompressionRate. */
  commHookOptions?: Partial<CommHookOptions>;
  /**
   * BatchNormalization in training: `sync` (default) normalises with the statistics of the global batch (a collective
   * inside forward and backward), so N devices give what one engine gives; `local` uses each device's own batch
   * (PyTorch DDP's default, faster, not equal to one engine) and averages the moving statistics after every step.
   */
  batchNorm?: 'sync' | 'local';
  /**
   * When the next forward waits for the previous step's update: `group` (default) just before the first layer that
   * uses each exchange group (the parameters are written group by group, inside forward), `step` before forward
   * starts, for every group at once. The parameters are the same bits either way; `step` is for a custom layer that
   * reads a weight another layer holds (tandem cannot see that read).
   */
  forwardWait?: 'group' | 'step';
  /**
   * The loss: `categorical` (sparse categorical cross-entropy, from logits or a softmax), `binary` (one output on two
   * classes, from a sigmoid or a logit), or a regression loss (one output, float targets from a data module): `mse`,
   * `mae`, `huber` (delta 1), `logcosh`, `msle`, `mape`, `poisson`, as tfjs-layers computes each.
   * Default: the loss a saved model.json was compiled with (its trainingConfig), else read from the model's output.
   */
  loss?: LossKind;
  /**
   * ES modules (paths) loaded in every thread of the run before anything else: each registers what it
   * brings — a transport (`registerTransport`), a method (`registerMethod`), an engine (`registerEngine`).
   */
  plugins?: string[];
  /** Directory for model.json + weights.bin + summary.json. */
  out?: string;
  classes?: number;
  /** [height, width] or [height, width, channels] of synthetic images. */
  imageSize?: number[];
  /** Samples in a synthetic dataset. */
  datasetSize?: number;
  /**
   * Watchdog: how long the main thread waits for a device's report before failing the run and naming it.
   * Device threads waiting on a peer give up after twice this (so the watchdog, which knows who is silent, speaks first).
   */
  stallTimeoutMs?: number;
  loaderThreads?: number;
  faultInjection?: FaultInjection;
}

export interface ResolvedConfig {
  method: Method;
  classifier?: ClassifierConfig;
  /** Samples [0, trainSize) train; [trainSize, datasetSize) are held out. */
  trainSize: number;
  /** A data module's image inputs far outside the usual range (data/input-scale.ts): the run warns with it once, on host 0. */
  inputWarning?: string;
  evalSamples: number;
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
  /** Replicas in the job (the world size: processes × local devices). */
  devices: number;
  /** Processes × local devices, and this process's rank. */
  topology: Topology;
  /** Several hosts: where host 0 serves the store. */
  rendezvous?: Rendezvous;
  backend: BackendName;
  nativeThreads: number;
  nativeFusion: boolean;
  batch: number;
  perDevice: number;
  steps: number;
  stepsPerEpoch: number;
  optimizer: OptimizerConfig;
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
  /** The loss, when the config or a saved model's trainingConfig names one (else read from the model's output on each device). */
  loss?: LossKind;
  /** Plugin module URLs (file:), loaded by every thread. */
  plugins: string[];
  out?: string;
  stallTimeoutMs: number;
  loaderThreads: number;
  faultInjection?: FaultInjection;
}
