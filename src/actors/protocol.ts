/**
 * Messages between the main thread and a device's two threads. Shared by both
 * sides and nothing else: one union per direction, discriminated by `type`.
 */
import type { ResolvedConfig } from '../config.js';
import type { SerializedError } from '../errors.js';
import type { ParameterGroup } from '../model/parameter-layout.js';
import type { SharedBuffers } from './shared-buffers.js';
import type { Phase } from './control-block.js';
import type { Span } from '../monitor/span.js';
import type { HeadState } from '../checkpoint/checkpoint-file.js';

export interface WeightShape { name: string; shape: number[] }

/** A device's classifier head after training: W [embedding, labels.length], b, and its global labels. */
export interface HeadValues { w: Float32Array; b?: Float32Array; labels: Int32Array }

/** The model as tfjs's save handler gives it, weights as one buffer. */
export interface ModelArtifactsData {
  modelTopology: object;
  weightSpecs: { name: string; shape: number[]; dtype: string }[];
  weightData: ArrayBuffer;
}

// main -> compute thread
export type ToCompute =
  | { type: 'init'; device: number; config: ResolvedConfig; control: SharedArrayBuffer; groupCount: number }
  | { type: 'buffers'; buffers: SharedBuffers; groups: ParameterGroup[] }
  | { type: 'step'; step: number }
  | { type: 'finish'; lastStep: number; exportModel: boolean }
  | { type: 'snapshotHead' }
  | { type: 'restoreHead'; head: HeadState };

// compute thread -> main
export type FromCompute =
  | { type: 'built'; device: number; weights: WeightShape[]; numTensors: number }
  | { type: 'initialised'; device: number }
  | { type: 'stepDone'; device: number; step: number; loss: number; correct: number; count: number; computeMs: number; loadMs: number; numTensors: number; spans: Span[]; nonFinite?: string }
  | { type: 'headSnapshot'; device: number; head?: HeadState }
  | { type: 'headRestored'; device: number }
  | { type: 'finished'; device: number; artifacts?: ModelArtifactsData; head?: HeadValues; numTensors: number }
  | { type: 'error'; device: number; step: number; phase: Phase; error: SerializedError };

// main -> comm thread
export type ToComm = {
  type: 'start';
  device: number;
  config: ResolvedConfig;
  control: SharedArrayBuffer;
  buffers: SharedBuffers;
  groups: ParameterGroup[];
  /** The first step to train (1, or the step after a resumed checkpoint's). */
  firstStep: number;
};

// comm thread -> main
export type FromComm =
  | { type: 'exchanged'; device: number; step: number; group: number; waitMs: number; exchangeMs: number; updateMs: number; spans: Span[]; carried: { start: number; end: number }; skipped: boolean }
  | { type: 'stopped'; device: number }
  | { type: 'error'; device: number; step: number; phase: Phase; error: SerializedError };
