/**
 * A step's forward and backward passes on a device: one pass over its batch / devices samples, or, with gradient
 * accumulation (`accumulate: N`), N passes over micro-batches of batch / (devices × N) samples, one after the other.
 * The earlier micro-batches' gradients are summed on the compute thread; only the last pass hands gradients over, their
 * mean, so the exchange sees one step's gradient of the whole batch (the mean of the micro-batches' mean gradients:
 * the batch's mean gradient, in other float rounding) and the tensors alive are a micro-batch's. BatchNormalization
 * normalises each micro-batch with its own statistics (sync: the micro-batch of every device) and updates its moving
 * statistics once per micro-batch.
 */
import * as tf from '#tfjs';
import type { ComputeConfig } from './config-slices.js';
import { sampleSize } from '../data/dataset.js';
import type { BackwardPass, MicroBatch, PassResult } from './backward-pass.js';
import type { Engine, ParamsMirror } from '../engine/engine.js';
import type { LayersModel } from '../engine/tfjs-types.js';

export interface StepPassesInputs {
  cfg: Pick<ComputeConfig, 'accumulate' | 'perDevice' | 'sampleShape' | 'targetShape'>;
  /** The step's samples in the shared input slot: x, the class labels, the float targets of a regression. */
  x: Float32Array;
  y: Int32Array;
  targets?: Float32Array;
  syncReads: boolean;
  /** The layout's floats, for the sum of the micro-batches' gradients (accumulate > 1). */
  sum?: Float32Array;
  /**
   * The rows of the slot this step trains: perDevice, or a partial batch's share (device-share.ts). Accumulation
   * takes whole batches only (the config refuses partialBatch with accumulate > 1).
   */
  rows: number;
  /** A pass over one micro-batch (undefined: the whole batch). */
  pass: (micro: MicroBatch | undefined) => BackwardPass;
  /** Between two micro-batches: the next forward begins. */
  between: () => void;
  model: LayersModel;
  /** The engine's scope over the step's passes (its weights unchanged throughout), when it has one. */
  scope?: Engine['stepScope'];
  /** The comm thread's bf16 copy of the parameters for this step, when the run keeps one (params-mirror.ts). */
  mirror?: ParamsMirror;
}

/** The step's passes; its loss is the mean over the micro-batches, its correct count their sum. */
export async function runStepPasses(p: StepPassesInputs): Promise<PassResult> {
  const end = p.scope?.(tf, p.model, p.mirror);
  try {
    return await allPasses(p);
  } finally {
    end?.();
  }
}

async function allPasses(p: StepPassesInputs): Promise<PassResult> {
  const n = p.cfg.accumulate;
  if (n === 1) return runOne(p, 0, p.rows, undefined);
  if (!p.sum) throw new Error('runStepPasses: accumulate > 1 needs the gradient sum buffer');
  const size = p.cfg.perDevice / n;
  let loss = 0,
    correct = 0,
    last: PassResult | undefined;
  let nonFinite: string | undefined, nonFiniteLoss: number | undefined, metrics: number[] | undefined;
  for (let m = 0; m < n; m++) {
    if (m > 0) p.between();
    last = await runOne(p, m * size, size, { index: m, count: n, sum: p.sum, nonFiniteLoss });
    loss += last.loss;
    correct += last.correct;
    metrics = last.metrics?.map((v, i) => v + (metrics?.[i] ?? 0));
    nonFinite ??= last.nonFinite;
    nonFiniteLoss ??= last.nonFiniteLoss;
  }
  return { ...last!, loss: loss / n, correct, metrics, nonFinite, nonFiniteLoss };
}

/** One pass over samples [from, from + size) of the slot. */
async function runOne(p: StepPassesInputs, from: number, size: number, micro: MicroBatch | undefined) {
  const { cfg, x, y, targets, syncReads } = p;
  const per = x.length / cfg.perDevice;
  // the slot's rows as they are on a synchronous engine; else (and a micro-batch) a copy: a plain ArrayBuffer
  const part = <T extends Float32Array | Int32Array>(a: T, k: number): T =>
    micro === undefined && syncReads
      ? size === cfg.perDevice
        ? a
        : (a.subarray(0, size * k) as T)
      : (a.slice(from * k, (from + size) * k) as T);
  const xs = tf.tensor(part(x, per), [size, ...cfg.sampleShape], 'float32');
  const target = cfg.targetShape ?? []; // a target tensor per sample, else one float or class id
  const ys = targets
    ? tf.tensor(part(targets, sampleSize(target)), [size, ...target], 'float32')
    : tf.tensor(part(y, 1), [size], 'int32');
  try {
    return await p
      .pass(micro)
      .run(xs, ys, micro === undefined && size === cfg.perDevice ? y : y.subarray(from, from + size));
  } finally {
    tf.dispose([xs, ys]);
  }
}
