/**
 * TensorBoard event files of a `fit`, named and laid out as tfjs-node's `tf.node.tensorBoard` writes them: `DIR/train`
 * and `DIR/val` (validation metrics), tags `batch_<metric>` per batch and `epoch_<metric>` per epoch.
 */
import path from 'node:path';
import * as tf from '#tfjs';
import { EventFileWriter } from './tensorboard-writer.js';
import type { ScalarValue } from './tfevents.js';

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

/**
 * A callback for `fit` (and tfjs's `model.fit`) writing TensorBoard event files, shaped like tfjs-node's
 * `tf.node.tensorBoard(dir)`: `DIR/train` and `DIR/val`, `batch_<metric>` at the batches seen so far,
 * `epoch_<metric>` at the epochs seen so far. Files are appended every 2 s, at each epoch's end and at the end.
 */
export function tensorBoard(dir: string, args: TensorBoardCallbackArgs = {}): tf.CustomCallback {
  const writers = new Map<string, EventFileWriter>();
  let batches = 0,
    epochs = 0;
  const flushAll = async () => void (await Promise.all([...writers.values()].map(w => w.flush())));
  return new tf.CustomCallback({
    onBatchEnd: async (_batch, logs) => {
      batches++;
      if (args.updateFreq !== 'epoch' && logs) logMetrics(dir, writers, logs, 'batch_', batches);
    },
    onEpochEnd: async (_epoch, logs) => {
      epochs++;
      if (logs) logMetrics(dir, writers, logs, 'epoch_', epochs);
      void flushAll();
    },
    onTrainEnd: async () => {
      await Promise.all([...writers.values()].map(w => w.close()));
      writers.clear();
    },
  });
}
