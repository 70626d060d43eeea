/** The shapes a run reports: per-step metrics, the final summary, hooks and the handle of a started run. */
import type { Observable } from '#rxjs';
import type { ResolvedConfig } from '../config-types.js';
import type { ParameterLayout } from '../model/parameter-layout.js';
import type { Span } from '../monitor/span.js';
import type { RunEvent } from '../monitor/run-event.js';
import type { AutoChoice } from '../profiling/choose-strategy.js';
import type { ClassifierSummary } from '../classifier/classifier-result.js';
import type { EngineDevice } from '../engine/engine.js';
import type { StepValues } from '../monitor/step-values.js';
import type { OptimizerWeights } from '../optim/optimizer-weights.js';

/** A step as the trainer reports it: the values every view shows, and the tensors and metrics. */
export interface StepMetrics extends StepValues {
  /** tfjs tensors alive on each device after the step. */
  numTensors: number[];
  /** The global batch's value of each of the run's `metrics` (tfjs's metric functions), when it has some. */
  metrics?: number[];
}

export interface TrainSummary {
  config: ResolvedConfig;
  /** The last step trained (the run's steps, or where it was stopped). */
  steps: number;
  /** 1, or the step after the checkpoint the run resumed from. */
  firstStep: number;
  /** Set when `stop()` (SIGINT/SIGTERM/SIGHUP on the CLI) ended the run early, after this step. */
  stoppedAt?: number;
  /** The last checkpoint written. */
  checkpointPath?: string;
  finalLoss: number;
  finalAccuracy: number;
  samplesPerSecond: number;
  wallSeconds: number;
  meanStepMs: number;
  /** Mean step time after the warm-up steps (min(3, steps/5)). */
  steadyStepMs: number;
  timings: {
    /** Compute-thread time (forward + backward + hand-off) per step after warm-up, slowest device. */
    steadyComputeMs: number;
    meanComputeMs: number;
    /** Per exchange group: all-reduce (with any emulated link hold), averaged over groups and steps. */
    meanExchangeMs: number;
    meanUpdateMs: number;
    meanLoadWaitMs: number;
    /** The share of the training time the steps waited for their inputs (meanLoadWaitMs / meanStepMs). */
    loadWaitShare: number;
  };
  parameters: number;
  /**
   * Steps every device of this process ran as the kernels it recorded on earlier steps, without tfjs's layers, engine
   * and tape around them (docs/guide/precision.md, "Replayed steps"); the others ran through tfjs.
   */
  replayedSteps: number;
  /** Digest of the bits of this process's replica (every replica is identical; compare it across hosts). */
  replicaChecksum: string;
  strategy: { name: string; groups: { name: string; parameters: number }[] };
  /**
   * What each rank handed its gradient collective per step (floats; bytes = 4×), measured, and the hook that sent it
   * (none: all-reduce).
   */
  wire: { commHook: string; floatsPerStep: number; bytesPerStep: number };
  /** Present when the link was EMULATED (`--link`): the exchange was held to this link's speed. */
  link?: { emulated: true; label: string; bitsPerSecond: number; latencyMs: number };
  tracePath?: string;
  /** With `out`: the timeline picture of the last steps. */
  timelinePath?: string;
  /** onNan 'skip-step': the group updates skipped for a non-finite gradient, with the first offending variable. */
  skippedUpdates: { step: number; group: number; variable?: string }[];
  /** Data-parallel with `heldOut` samples: accuracy of the trained model on them. */
  heldOut?: { samples: number; accuracy: number };
  /** Method B / partial-fc: heads, what was exchanged, held-out evaluation. */
  classifier?: ClassifierSummary;
  /** With `strategy: 'auto'`: what was picked and why. */
  auto?: AutoSummary;
  /**
   * Per device of this process (local order), the accelerator its engine ran on (webgpu: the GPU adapter); absent on
   * the CPU engines.
   */
  engineDevices?: EngineDevice[];
  history: { step: number; loss: number; accuracy: number }[];
  /** With epoch logs (validationSplit, earlyStopping, keepBest): each epoch's logs, tfjs's keys (`val_loss`, …). */
  epochs?: ({ epoch: number } & Record<string, number>)[];
  /** Early stopping ended the run after `epoch`: the monitored log's best epoch and value. */
  earlyStop?: { epoch: number; monitor: string; bestEpoch: number; best: number };
  /** With keepBest: the kept epochs' models (`out/best/epoch-<E>`), best first, with their monitored value. */
  bestEpochs?: { epoch: number; value: number; dir: string }[];
  /** Final parameters in model order (`model.trainableWeights`), from device 0. */
  weights: { name: string; shape: number[]; values: Float32Array }[];
  /**
   * Final non-trainable weights in model order (`model.nonTrainableWeights`: BatchNormalization's moving statistics,
   * frozen layers), from device 0.
   */
  nonTrainableWeights: { name: string; shape: number[]; values: Float32Array }[];
  /** Whether every device ended with bit-identical non-trainable weights. */
  nonTrainableIdentical: boolean;
  modelPath?: string;
}

export interface TrainHooks {
  /** After each step, once every device has applied its update: every replica's parameters. */
  onStepApplied?(step: number, replicas: Float32Array[], layout: ParameterLayout): void;
  onStep?(metrics: StepMetrics): void;
  /** Spans of the device threads as they are reported. */
  onSpans?(spans: Span[]): void;
  /** Lifecycle events and warnings (see RunEvent). */
  onEvent?(event: RunEvent): void;
  /** Polled after every step: true finishes the run there (with a checkpoint if a checkpoint directory is known). */
  shouldStop?(): boolean;
  /** With `strategy: 'auto'`: what the profiler decided, before training starts. */
  onAutoChoice?(choice: AutoChoice): void;
  /**
   * After an epoch's last step, every device having applied it and no step posted after it (the devices idle until it
   * resolves): its weights on request; resolves true to end the run after this step. Several hosts: every host's hook
   * must resolve the same (agree through `end.hosts`), or the hosts stop at different steps.
   */
  atEpochEnd?(end: EpochEnd): Promise<boolean>;
  /**
   * Every process, after each step: this host's devices' share of it (several hosts: `onStep` on host 0 has the
   * world's, later; elsewhere the host's own).
   */
  onHostStep?(share: HostStepShare): void;
  /** Several hosts: once the world is joined, before the hosts' flags are compared (fit checks its arguments here). */
  atHostsMet?(hosts: RunHosts): Promise<void>;
}

/** An epoch ended: its number (1 first), its last step, and the weights the devices hold now. */
export interface EpochEnd {
  epoch: number;
  step: number;
  weights(): Promise<Pick<TrainSummary, 'weights' | 'nonTrainableWeights'>>;
  /**
   * The optimizer's state the devices hold now, as tfjs's optimizers keep it: its iterations, and each slot's array per
   * trainable weight (model order) named `<weight>/<slot>`; OptimizerWeightsProblem for an optimizer that does not
   * declare tfjs's names of its slots (`tfjsStateNames`).
   */
  optimizerState(): OptimizerWeights;
  /** Several hosts: this host's place, and gathers of every host's values for this epoch's end. */
  hosts?: RunHosts;
}

/** A step on this host's devices: their samples, mean loss, correct count and metrics' sums; the step's lr. */
export interface HostStepShare {
  step: number;
  samples: number;
  loss: number;
  correct: number;
  /** The learning rate this step's update used. */
  lr: number;
  /** The two sums of each of the run's `metrics` over these devices (model/metric-values.ts), when it has some. */
  metricSums?: number[];
}

/** Several hosts: this host's rank, their count, and a gather of one JSON value per host. */
export interface RunHosts {
  process: number;
  processes: number;
  /** `host 1` (or `GPU process 1`): how errors name host `h`. */
  describe(h: number): string;
  /** Every host's `value` for `what` (each name once per scope), in host order: the same on every host. */
  gather<T>(what: string, value: T): Promise<T[]>;
}

/** A run in progress: its spans and step metrics as RxJS streams on the main thread, and its result. */
export interface TrainingHandle {
  /**
   * Finish the current step, checkpoint if a checkpoint directory is configured, end cleanly (`done` resolves with
   * `stoppedAt`).
   * A step that has not reached its stop checkpoint `stopGraceMs` later is aborted, as by `abort()`.
   */
  stop(): void;
  /**
   * End now: the step in flight is abandoned (every thread ends, even a hung one), a checkpoint of the last step every
   * device completed is written (with a checkpoint directory, when the run's state is all in shared memory: not for
   * local heads or non-trainable weights), and `done` rejects with ABORTED, naming the checkpoint.
   */
  abort(): void;
  /**
   * Every span of every device thread, as it is reported (about once per step and group). Several hosts: host 0's has
   * every host's.
   */
  timeline$: Observable<Span>;
  /**
   * One per step. Several hosts: on host 0 the world's (every device of every host), elsewhere the host's own devices'.
   */
  metrics$: Observable<StepMetrics>;
  /**
   * Lifecycle events and warnings: dashboard (with `dashboard`: the page's URL, first), started, auto, ready, epoch,
   * epochEnd (with epoch logs: validationSplit, earlyStopping, keepBest), checkpoint, warning, stopped, finished; or,
   * last, failed.
   */
  events$: Observable<RunEvent>;
  done: Promise<TrainSummary>;
}

/** `strategy: 'auto'`: the schedule picked, its predicted step, the link measured, every candidate's prediction. */
export interface AutoSummary {
  strategy: string;
  splitLayer?: number;
  forwardWait: 'group' | 'step';
  exchangeOrder: 'ready' | 'priority';
  chunkFloats?: number;
  commHook?: string;
  predictedMs: number;
  reason: string;
  /** The link the prediction used: α (ms), β as bits per second; undefined: one host, shared memory. */
  link?: {
    alphaMs: number;
    bitsPerSecond: number;
    source: 'measured' | 'emulated';
    samples?: { bytes: number; ms: number }[];
  };
  /**
   * The CPU ceiling: the machine's cores, the host processes sharing them, the pick's process CPU per step (undefined:
   * not calibrated) and whether the ceiling sets its prediction.
   */
  cpu?: { machineCores: number; hostsOnMachine: number; cpuMsPerStep?: number; bound: boolean };
  candidates: { key: string; predictedMs: number }[];
}
