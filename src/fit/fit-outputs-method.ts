/**
 * The `fit-outputs` training method: data-parallel, with the loss of a model of several outputs that fit trains as
 * one flat output (fit-outputs.ts). On each device it reads the outputs' spec beside the model.json, cuts the flat
 * output and the flat target row back into the outputs, and computes each output's loss as tfjs-layers does (the
 * batch mean of its loss function: model/target-loss.ts), their sum weighted by `lossWeights`, and the two sums of
 * every logged metric after `loss` (an output's loss, or a tfjs metric of an output: model/metric-values.ts).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { DATA_PARALLEL } from '../methods/data-parallel.js';
import { TandemError } from '../errors.js';
import { getEngine } from '../engine/engine-registry.js';
import { targetLoss } from '../model/target-loss.js';
import { metricSums, metricValues, sparseCrossentropy } from '../model/metric-values.js';
import type { Tensor, Tf } from '../engine/tfjs-types.js';
import type { DeviceMethod, TrainingMethod } from '../methods/training-method.js';
import { OUTPUTS_FILE, type OutputSpec, type OutputsSpec } from './fit-outputs.js';
import { userFunction, userFunctionMean } from './user-functions.js';

export const FIT_OUTPUTS_METHOD_NAME = 'fit-outputs';

export const FIT_OUTPUTS_METHOD: TrainingMethod = {
  ...DATA_PARALLEL,
  name: FIT_OUTPUTS_METHOD_NAME,
  dataParallel: true,
  ownTargets: true,
  description: "fit's models of several outputs: data-parallel, a loss per output weighted by lossWeights",
  createDevice({ tf, cfg }): DeviceMethod {
    const modelJson = cfg.model.source.startsWith('file:') ? new URL(cfg.model.source).pathname : cfg.model.source;
    const spec = JSON.parse(readFileSync(path.join(path.dirname(modelJson), OUTPUTS_FILE), 'utf8')) as OutputsSpec;
    const syncReads = getEngine(cfg.backend).capabilities.synchronousReads;
    return {
      localVariables: [],
      loss(out, ys) {
        const { loss, sums } = outputsLoss(tf, spec, out, ys);
        if (!syncReads) {
          const kept = tf.keep(sums);
          const metrics = (kept.data() as Promise<Float32Array>).then(v => Array.from(v)).finally(() => kept.dispose());
          return { loss, correct: 0, metrics };
        }
        const metrics = Array.from(sums.dataSync());
        sums.dispose();
        return { loss, correct: 0, metrics };
      },
      applyLocal() {
        /* no local state */
      },
      snapshot: () => undefined,
      restore() {
        throw new TandemError('BAD_CHECKPOINT', 'a fit-outputs device has no local state to restore');
      },
      finalValues: () => undefined,
    };
  },
  async summarize() {
    return {};
  },
};

/**
 * An output's loss with class weights, as tfjs's fit with `classWeight` computes it: each sample's loss times its
 * class's weight (the class: a class id, a [rows, 1] column, or the argmax of a one-hot row), then the batch mean.
 */
function weightedLoss(tf: Tf, p: Tensor, y: Tensor, o: OutputSpec, table: number[]): Tensor {
  return tf.tidy(() => {
    const rows = p.shape[0] ?? 1;
    const column = y.rank === 1 || (y.rank === 2 && y.shape[1] === 1);
    const ids = column ? tf.reshape(y, [rows]) : tf.argMax(y, 1);
    const weights = tf.gather(tf.tensor1d(table, 'float32'), tf.cast(ids, 'int32'));
    if (o.lossFunction) return tf.mean(tf.mul(userFunction(tf, o.lossFunction)(y, p), weights)); // as tfjs weighs
    const perSample =
      o.kind === 'binary'
        ? tf.metrics.binaryCrossentropy(tf.reshape(y, p.shape), p)
        : column
          ? sparseCrossentropy(tf, ids, p)
          : tf.metrics.categoricalCrossentropy(y, p);
    return tf.mean(tf.mul(tf.reshape(perSample, [rows]), weights));
  });
}

/** The weighted sum of the outputs' losses, and the metrics' sums (flat: two per metric). */
export function outputsLoss(tf: Tf, spec: OutputsSpec, out: Tensor, ys: Tensor): { loss: Tensor; sums: Tensor } {
  const rows = out.shape[0] ?? 1;
  const targets = tf.reshape(ys, [rows, -1]);
  let at = 0,
    targetAt = 0;
  const parts = spec.outputs.map((o, i) => {
    const p = tf.reshape(tf.slice(out, [0, at], [rows, o.size]), [rows, ...o.shape]);
    const y = tf.reshape(tf.slice(targets, [0, targetAt], [rows, o.targetSize]), [rows, ...o.targetShape]);
    at += o.size;
    targetAt += o.targetSize;
    const table = spec.classWeights?.[i];
    const loss = table
      ? weightedLoss(tf, p, y, o, table)
      : o.lossFunction
        ? userFunctionMean(tf, o.lossFunction, y, p)
        : targetLoss(tf, p, y, { kind: o.kind, fromProbabilities: true }).loss;
    return { p, y, loss };
  });
  const loss = parts.map((x, i) => tf.mul(x.loss, spec.outputs[i].weight)).reduce((a, b) => tf.add(a, b));
  const sums = tf.tidy(() =>
    spec.metrics.length === 0
      ? tf.zeros([0])
      : tf.concat(
          spec.metrics.map(m => {
            const x = parts[m.output];
            if (m.user) return tf.stack([tf.mul(userFunctionMean(tf, m.user, x.y, x.p), rows), tf.scalar(rows)]);
            if (m.fn === null) return tf.stack([tf.mul(x.loss, rows), tf.scalar(rows)]);
            return metricSums(tf, [m.fn], x.y, x.p);
          }),
        ),
  );
  return { loss, sums };
}

/**
 * One evaluated batch of a model of several outputs: [loss, ...metrics] (each the batch's mean), as evaluate and a
 * validation dataset read them; the caller weighs them by the batch's rows.
 */
export function outputsBatchValues(tf: Tf, spec: OutputsSpec, predicted: Tensor, ys: Tensor): number[] {
  return tf.tidy(() => {
    const { loss, sums } = outputsLoss(tf, spec, predicted, ys);
    return [loss.dataSync()[0], ...metricValues(Array.from(sums.dataSync()))];
  });
}
