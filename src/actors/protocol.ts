/**
 * Messages between the main thread and a device's two threads. Shared by both
 * sides and nothing else: one union per direction, discriminated by `type`.
 * Every request to a compute thread has one reply type (`ComputeReplyOf`),
 * matched on the main thread by (type, step).
 */
import type { CommConfig, ComputeConfig } from './config-slices.js';
import type { SerializedError } from '../errors.js';
import type { ParameterGroup } from '../model/parameter-layout.js';
import type { SharedBuffers } from './shared-buffers.js';
import type { Phase } from '../pipeline/control-block.js';
import type { Span } from '../monitor/span.js';
import type { HeadState } from '../checkpoint/checkpoint-file.js';
import type { RankHandle } from '../collectives/transport.js';
import type { ParameterSpec } from '../model/parameter-layout.js';
import type { RankHookState } from '../pipeline/hook-states.js';
import type { EngineDevice } from '../engine/engine.js';

export interface WeightShape {
  name: string;
  shape: number[];
}

/** A device's classifier head after training: W [embedding, labels.length], b, and its global labels. */
export interface HeadValues {
  w: Float32Array;
  b?: Float32Array;
  labels: Int32Array;
}

/** The model as tfjs's save handler gives it, weights as one buffer. */
export interface ModelArtifactsData {
  modelTopology: object;
  weightSpecs: { name: string; shape: number[]; dtype: string }[];
  weightData: ArrayBuffer;
}

/**
 * Which device a thread is: its index in this process (control words, shared slots) and its global rank (names, data,
 * labels).
 */
export interface DeviceIdentity {
  local: number;
  rank: number;
}

// main -> compute thread
export type ToCompute =
  | { type: 'init'; device: DeviceIdentity; config: ComputeConfig; control: SharedArrayBuffer; groupCount: number }
  | { type: 'buffers'; buffers: SharedBuffers; groups: ParameterGroup[]; collective?: RankHandle }
  | { type: 'step'; step: number }
  | { type: 'finish'; lastStep: number; exportModel: boolean }
  | { type: 'snapshotHead'; step: number }
  | { type: 'restoreHead'; head: HeadState };

// compute thread -> main (`device` is the global rank)
export type FromCompute =
  /**
   * `weights`: trainable (the shared layout); `state`: the non-trainable weights (model order); BatchNormalization
   * layers by name.
   */
  /** engineDevice: the accelerator its engine opened (webgpu: the GPU adapter), when it runs on one. */
  | {
      type: 'built';
      device: number;
      weights: WeightShape[];
      state: WeightShape[];
      batchNormLayers: string[];
      /** Each layer's class and settings (model/layer-settings.ts), for the hosts to compare. */
      layers: string[];
      numTensors: number;
      engineDevice?: EngineDevice;
    }
  | { type: 'initialised'; device: number }
  | {
      type: 'stepDone';
      device: number;
      step: number;
      loss: number;
      correct: number;
      /** The metrics' sums on this device's samples (model/metric-values.ts), when the run computes metrics. */
      metrics?: number[];
      count: number;
      computeMs: number;
      loadMs: number;
      numTensors: number;
      spans: Span[];
      /** The step ran as the device's recorded kernels (step-replay.ts), not through tfjs. */
      replayed: boolean;
      /** A device that updates on its compute thread (inline-update.ts): the step's updates, as a comm thread's. */
      exchanged?: Extract<FromComm, { type: 'exchanged' }>[];
      nonFinite?: string;
      /**
       * The step's loss on this device when it was not finite: nothing (onNan 'error') or NaN (skip-step) was handed
       * over.
       */
      nonFiniteLoss?: number;
    }
  | { type: 'headSnapshot'; device: number; step: number; head?: HeadState; state?: Float32Array }
  | { type: 'headRestored'; device: number }
  | {
      type: 'finished';
      device: number;
      artifacts?: ModelArtifactsData;
      head?: HeadValues;
      worldHeads?: HeadValues[];
      state: Float32Array;
      numTensors: number;
    }
  | { type: 'error'; device: number; step: number; phase: Phase; error: SerializedError };

/** The reply a compute thread sends to each request. */
export interface ComputeReplies {
  init: 'built';
  buffers: 'initialised';
  step: 'stepDone';
  finish: 'finished';
  snapshotHead: 'headSnapshot';
  restoreHead: 'headRestored';
}
export type ComputeReplyOf<R extends ToCompute['type']> = Extract<FromCompute, { type: ComputeReplies[R] }>;
export type FinishedReport = Extract<FromCompute, { type: 'finished' }>;

// main -> comm thread
export type ToComm = {
  type: 'start';
  device: DeviceIdentity;
  config: CommConfig;
  control: SharedArrayBuffer;
  buffers: SharedBuffers;
  groups: ParameterGroup[];
  /** The layout's variables (shapes and offsets), for a communication hook. */
  variables: ParameterSpec[];
  /** This rank's end of the gradient communicator. */
  collective: RankHandle;
  /** The first step to train (1, or the step after a resumed checkpoint's). */
  firstStep: number;
  /**
   * With a communication hook: this rank's hook state from the resumed checkpoint (`source`), and whether to share it
   * for checkpoints.
   */
  hookState?: { restore?: RankHookState; source?: string; share: boolean };
};

// comm thread -> main
export type FromComm =
  | {
      type: 'exchanged';
      device: number;
      step: number;
      group: number;
      waitMs: number;
      exchangeMs: number;
      updateMs: number;
      spans: Span[];
      carried: { start: number; end: number };
      skipped: boolean;
      /** Floats this rank handed to the collective for the exchange (the wire measure, with or without a hook). */
      wireFloats: number;
    }
  /** The shared copy of the rank's hook state (hook-states.ts), current once every group of a step is applied. */
  | { type: 'hookState'; device: number; arrays: RankHookState }
  | { type: 'stopped'; device: number }
  | { type: 'error'; device: number; step: number; phase: Phase; error: SerializedError };
