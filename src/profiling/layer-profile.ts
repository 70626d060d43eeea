import type { ClockKind } from './layer-clock.js';

/** What the profiler measures: per layer, in transmission order (output layer first). */
export interface LayerCost {
  name: string;
  /** tfjs class name, e.g. Conv2D, Dense, MaxPooling2D. */
  className: string;
  forwardMs: number;
  backwardMs: number;
  parameters: number;
  /** Parameter bytes (float32). */
  bytes: number;
  /** Elements of the layer's output for one device batch. */
  outputSize: number;
}

export interface ModelProfile {
  model: string;
  backend: string;
  /** Samples per device the times were measured at. */
  batch: number;
  /** Layers in transmission order: output layer first. */
  layers: LayerCost[];
  /** Measured real training step on the same engine: forward, backward (whole model). */
  stepForwardMs: number;
  stepBackwardMs: number;
  /** Per-step cost outside forward/backward: loading parameters into the engine, hand-off. */
  overheadMs: number;
  /** Shared-memory all-reduce + update throughput measured on this machine (bytes per ms). */
  exchangeBytesPerMs: number;
  updateBytesPerMs: number;
  measuredSteps: number;
  warmupSteps: number;
  /** Timed repetitions per layer (their median is the layer's time). */
  reps: number;
  /** The clock every time above was measured on, and why that one. */
  clock: { kind: ClockKind; reason: string };
  /**
   * Set when calibrated against a short real run (see profileModel). `cpuMsPerStep`: the process CPU (every thread)
   * of one of its steady steps — compute, the shared-memory exchange among its devices, the update, the runtime's own
   * threads; `stepSpreadMs`: the standard deviation of its steady step periods (lockstep.ts); each undefined when it
   * ran too few steps to tell.
   */
  calibration?: {
    devices: number;
    computeScale: number;
    steadyStepMs: number;
    cpuMsPerStep?: number;
    stepSpreadMs?: number;
  };
  /** The model's trainable variables (model order), to lay out exchange groups exactly as a run does. */
  weights: { name: string; shape: number[] }[];
}

export function layerTimeMs(l: LayerCost): number {
  return l.forwardMs + l.backwardMs;
}
