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
import { metricSums } from '../model/metric-values.js';
import type { Tensor, Tf } from '../engine/tfjs-types.js';
import type { DeviceMethod, TrainingMethod } from '../methods/training-method.js';
import { OUTPUTS_FILE, type OutputsSpec } from './fit-outputs.js';

export const FIT_OUTPUTS_METHOD_NAME = 'fit-outputs';

export const FIT_OUTPUTS_METHOD: TrainingMethod = {
  ...DATA_PARALLEL,
  name: FIT_OUTPUTS_METHOD_NAME,
  dataParallel: true,
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

/** The weighted sum of the outputs' losses, and the metrics' sums (flat: two per metric). */
export function outputsLoss(tf: Tf, spec: OutputsSpec, out: Tensor, ys: Tensor): { loss: Tensor; sums: Tensor } {
  const rows = out.shape[0] ?? 1;
  const targets = tf.reshape(ys, [rows, -1]);
  let at = 0,
    targetAt = 0;
  const parts = spec.outputs.map(o => {
    const p = tf.reshape(tf.slice(out, [0, at], [rows, o.size]), [rows, ...o.shape]);
    const y = tf.reshape(tf.slice(targets, [0, targetAt], [rows, o.targetSize]), [rows, ...o.targetShape]);
    at += o.size;
    targetAt += o.targetSize;
    return { p, y, loss: targetLoss(tf, p, y, { kind: o.kind, fromProbabilities: true }).loss };
  });
  const loss = parts.map((x, i) => tf.mul(x.loss, spec.outputs[i].weight)).reduce((a, b) => tf.add(a, b));
  const sums = tf.tidy(() =>
    tf.concat(
      spec.metrics.map(m => {
        const x = parts[m.output];
        if (m.fn === null) return tf.stack([tf.mul(x.loss, rows), tf.scalar(rows)]);
        return metricSums(tf, [m.fn], x.y, x.p);
      }),
    ),
  );
  return { loss, sums };
}
