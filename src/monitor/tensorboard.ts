/**
 * TensorBoard event files of a `fit`, named and laid out as tfjs-node's `tf.node.tensorBoard` writes them: `DIR/train`
 * and `DIR/val` (validation metrics), tags `batch_<metric>` per batch and `epoch_<metric>` per epoch.
 */
import path from 'node:path';
import * as tf from '#tfjs';
import { EventFileWriter } from './tensorboard-writer.js';
import type { ScalarValue } from './tfevents.js';

/** What tfjs's `fit` tells its callbacks (`params`) that the step numbers need. */
interface FitParams {
  initialEpoch: number | null;
  steps: number | null;
  samples: number | null;
  batchSize: number | null;
}

export interface TensorBoardCallbackArgs {
  /** 'batch' (default): batch_ scalars every batch, and epoch_ scalars; 'epoch': epoch_ scalars alone. */
  updateFreq?: 'batch' | 'epoch';
}

const NOT_METRICS = new Set(['batch', 'size', 'num_steps']);

/** As tfjs-node's TensorBoardCallback: `val_` metrics go to DIR/val under their name without the prefix. */
function logMetrics(dir: string, writers: Map<string, EventFileWriter>, logs: tf.Logs, prefix: string, step: number) {
  const byWriter = new Map<string, ScalarValue[]>();
  for (const [key, value] of Object.entries(logs)) {
    if (NOT_METRICS.has(key) || typeof value !== 'number') continue;
    const val = key.startsWith('val_');
    const run = val ? 'val' : 'train';
    const list = byWriter.get(run) ?? [];
    list.push({ tag: `${prefix}${val ? key.slice(4) : key}`, value });
    byWriter.set(run, list);
  }
  for (const [run, values] of byWriter) {
    let writer = writers.get(run);
    if (!writer) {
      writer = new EventFileWriter(path.join(dir, run), { warn: m => console.warn(`tandem: ${m}`) });
      writers.set(run, writer);
    }
    writer.scalars(step, values);
  }
}

/** The learning rate of the model's optimizer (its config's `learningRate`), when it has one. */
function learningRate(model: unknown): number | undefined {
  const optimizer = (model as { optimizer?: Partial<tf.Optimizer> } | undefined)?.optimizer;
  const lr = optimizer?.getConfig?.().learningRate;
  return typeof lr === 'number' ? lr : undefined;
}

/** tfjs's CustomCallback, keeping the model `fit` gives it (for its optimizer's learning rate). */
class ModelCallback extends tf.CustomCallback {
  fitted: unknown;
  override setModel(model: Parameters<tf.CustomCallback['setModel']>[0]): void {
    super.setModel(model);
    this.fitted = model;
  }
}

/**
 * A callback for `fit` (and tfjs's `model.fit`) writing TensorBoard event files, shaped like tfjs-node's
 * `tf.node.tensorBoard(dir)`: `DIR/train` and `DIR/val`, `batch_<metric>` at the batches seen so far,
 * `epoch_<metric>` at the epochs seen so far (a fit with `initialEpoch` k: from epoch k + 1 and batch k × its
 * batches per epoch + 1 on, so that it goes on from the run it resumes), and `epoch_learning_rate` (the optimizer's,
 * as Keras's TensorBoard callback writes it; tfjs-node's leaves it out). Files are appended every 2 s, at each
 * epoch's end and at the end.
 */
export function tensorBoard(dir: string, args: TensorBoardCallbackArgs = {}): tf.CustomCallback {
  const writers = new Map<string, EventFileWriter>();
  let batches = 0,
    epochs = 0;
  const flushAll = async () => void (await Promise.all([...writers.values()].map(w => w.flush())));
  const callback: ModelCallback = new ModelCallback({
    onBatchEnd: async (_batch, logs) => {
      batches++;
      if (args.updateFreq !== 'epoch' && logs) logMetrics(dir, writers, logs, 'batch_', batches);
    },
    onTrainBegin: async () => {
      // fit({ initialEpoch }) goes on from a run before: its steps too, as Keras's callback numbers epochs
      const { initialEpoch, steps, samples, batchSize } = callback.params as Partial<FitParams>;
      const perEpoch = steps ?? (samples && batchSize ? Math.ceil(samples / batchSize) : 0);
      batches = Math.max(batches, (initialEpoch ?? 0) * perEpoch);
    },
    onEpochEnd: async (epoch, logs) => {
      epochs = Math.max(epochs + 1, epoch + 1); // tfjs's epoch counts from 0, initialEpoch included
      const lr = learningRate(callback.fitted);
      if (logs) logMetrics(dir, writers, lr === undefined ? logs : { ...logs, learning_rate: lr }, 'epoch_', epochs);
      void flushAll();
    },
    onTrainEnd: async () => {
      await Promise.all([...writers.values()].map(w => w.close()));
      writers.clear();
    },
  });
  return callback;
}
