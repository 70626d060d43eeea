/**
 * What a training method is: everything that differs between data-parallel
 * training, method B (a local classifier head per device) and Partial FC —
 * its options, its data loader, the loss each device computes and the local
 * state it keeps, what enters the collectives, what a checkpoint holds, and
 * what the summary reports. A new method is one file that exports a
 * `TrainingMethod` and registers it (`registerMethod`).
 *
 * Main thread: `resolveOptions`, `createLoader`, `computeCommunicator`,
 * `exportDevice`, `summarize`. Compute threads: `createDevice`.
 */
import type { ComputeConfig } from '../actors/config-slices.js';
import type { ClassifierConfig, ResolvedConfig, TrainConfig } from '../config-types.js';
import type { BlockingCollective } from '../collectives/collective.js';
import type { ShardLoader } from '../data/shard-loader.js';
import type { InputBuffers } from '../data/input-slots.js';
import type { LayersModel, Tensor, Tf, Variable } from '../engine/tfjs-types.js';
import type { FlatArithmetic } from '../optim/flat-arithmetic.js';
import type { FinishedReport, HeadValues, ModelArtifactsData } from '../actors/protocol.js';
import type { HeadState } from '../checkpoint/checkpoint-file.js';
import type { ParameterLayout } from '../model/parameter-layout.js';
import type { ClassifierSummary } from '../classifier/classifier-result.js';
import type { AnyOptionTable } from '../options/declaration.js';

/** What `resolveOptions` knows of the run. */
export interface MethodResolveContext {
  /** Classes of the dataset. */
  classes: number;
  /** Replicas in the job. */
  devices: number;
}

export interface TrainingMethod {
  readonly name: string;
  readonly description: string;
  /**
   * Trains as data-parallel does (its loader, full replicas, targets of a shape), with a loss of its own: the options
   * of data-parallel apply (loss, classWeight, partialBatch, accumulate).
   */
  readonly dataParallel?: boolean;
  /**
   * Its loss reads the data's target rows itself (fit-outputs: several outputs' targets side by side, class ids among
   * them): the config does not hold the target shape against the model's one output.
   */
  readonly ownTargets?: boolean;
  /** The method's own options, declared (flags, help, known keys); `resolveOptions` checks them in context. */
  readonly options?: AnyOptionTable;
  /**
   * Checks the method's own options (BAD_CONFIG naming the field) and resolves them; rejects options of other methods.
   */
  resolveOptions(config: TrainConfig, ctx: MethodResolveContext): ClassifierConfig | undefined;
  /** Samples held out for evaluation when the config gives none. */
  defaultHeldOut(datasetSize: number): number;
  /** The data loader of the run, filling this process's devices' input slots. */
  createLoader(cfg: ResolvedConfig, input: InputBuffers): Promise<ShardLoader>;
  /** When the method communicates inside forward/backward: floats per rank its compute communicator moves at once. */
  computeCommunicator(cfg: ResolvedConfig): { stagingFloats: number } | undefined;
  /** Devices keep state of their own (a head) that checkpoints must hold. */
  readonly localState: boolean;
  /** The device whose model is exported, and whether it must export one even without `out` (for the summary). */
  exportDevice(cfg: ResolvedConfig): { device: number; always: boolean };
  /** Compute thread: the method's part of one device. */
  createDevice(ctx: DeviceMethodContext): DeviceMethod;
  /** Main thread, after training: the method's part of the summary. */
  summarize(ctx: MethodSummaryContext): Promise<MethodSummary>;
}

export interface DeviceMethodContext {
  tf: Tf;
  /** The compute thread's slice of the run's configuration. */
  cfg: ComputeConfig;
  /** The device's global rank. */
  device: number;
  model: LayersModel;
  /** The flat arithmetic of the device's engine (a head's optimizer update). */
  arithmetic: FlatArithmetic;
  /** The compute communicator, when `computeCommunicator` asked for one. */
  collective?: BlockingCollective;
}

/** What the differentiated function of one step returns, through the method. */
export interface StepLoss {
  /** The scalar backward differentiates. */
  loss: Tensor;
  /** Correct predictions among this device's samples (a promise on an engine without synchronous reads). */
  correct: number | Promise<number>;
  /**
   * The metrics' sums on this device's samples (model/metric-values.ts; a promise as `correct` is), when it has some.
   */
  metrics?: number[] | Promise<number[]>;
  /** The loss to report when it is not `loss`'s value (Partial FC's global loss). */
  reportedLoss?: number;
  /** Gradients of the local variables computed by the method itself (not by backward). */
  localGradients?: Float32Array[];
}

export interface DeviceMethod {
  /** Variables that join backward beside the model's; their gradients never enter a collective. */
  readonly localVariables: Variable[];
  /**
   * Inside the differentiated function: the loss of the model's output `out` for labels `ys` (`labels`: the same, as
   * data).
   * A promise only on an engine without synchronous reads, where a method that needs values of the forward pass on the
   * host awaits them (the tape keeps recording across the awaits); on the other engines it must return synchronously.
   */
  loss(out: Tensor, ys: Tensor, labels: Int32Array, step: number): StepLoss | Promise<StepLoss>;
  /** After backward: one update of the local state from its gradients (order of `localVariables`). */
  applyLocal(gradients: Float32Array[], step: number): void;
  snapshot(): HeadState | undefined;
  restore(state: HeadState): void;
  /** After training: what the device reports (its head). */
  finalValues(): HeadValues | undefined;
  /**
   * After training, collective over the compute communicator (every rank calls it): every global rank's head when the
   * run spans hosts, else undefined.
   */
  worldHeads?(): HeadValues[] | undefined;
}

export interface MethodSummaryContext {
  cfg: ResolvedConfig;
  layout: ParameterLayout;
  /** What the gradient collectives carried in the run's first step (float ranges of the shared layout). */
  carried: { start: number; end: number }[];
  finished: FinishedReport[];
  /** The exported model (the feature extractor for the classifier methods). */
  artifacts?: ModelArtifactsData;
}

export interface MethodSummary {
  classifier?: ClassifierSummary;
  heldOut?: { samples: number; accuracy: number };
}
