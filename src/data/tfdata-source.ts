/**
 * A data module whose factory returns a `tf.data.Dataset` of `{ xs, ys }` batches, streamed: on the main thread (the
 * run's prepare phase) the dataset is counted once (one pass, keeping nothing), batch 0 goes into a `BatchRing`
 * published to the loader threads started afterwards, and the rest is read ahead into it, pass after pass, while
 * the run trains; on a loader thread the module's dataset is not iterated at all: the ring is read. `ys`: one label
 * (class id, or a float target for a regression) per sample, of shape [batch] or [batch, 1]; the classes are the
 * largest label + 1 when every label is a non-negative integer, else 1.
 */
import { isMainThread } from 'node:worker_threads';
import type * as tfNs from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import type { Dataset, DatasetSpec } from './dataset.js';
import { sampleSize } from './dataset.js';
import { allocateBatchRing, BatchRing } from './batch-ring.js';
import { DatasetStream, type BatchReading } from './dataset-stream.js';
import { publishRing, ringDataset } from './ring-dataset.js';

/** Batches read ahead of training for a data module's tf.data dataset: the ring's depth. */
export const MODULE_READ_AHEAD = 3;

/** Whether a data factory returned a `tf.data.Dataset` (by shape: tfjs may be another copy of the package). */
export function isTfDataset(value: unknown): value is tfNs.data.Dataset<tfNs.TensorContainer> {
  const v = value as { iterator?: unknown; batch?: unknown; size?: unknown } | null;
  return typeof v === 'object' && v !== null && typeof v.iterator === 'function' && typeof v.batch === 'function';
}

/** Closes the ring of the previous run on the same spec (a producer left waiting on it returns). */
const open = new Map<string, { ring: BatchRing; withdraw: () => void }>();

/** The streamed dataset of a module's `tf.data.Dataset` (see the file's comment). */
export async function streamedModuleDataset(
  dataset: tfNs.data.Dataset<tfNs.TensorContainer>,
  spec: DatasetSpec,
  file: string,
): Promise<Dataset> {
  const key = JSON.stringify(spec);
  if (!isMainThread) return ringDataset(key);
  const previous = open.get(key);
  previous?.ring.close();
  previous?.withdraw();
  const labels = labelReading(file);
  const stream = new DatasetStream(dataset, labels.reading);
  const { shape, first } = await stream.open(); // the counting pass sees every label
  const { batch, batchSizes, sampleShape } = shape;
  const ring = new BatchRing(
    allocateBatchRing({
      depth: MODULE_READ_AHEAD,
      batch,
      batchesPerEpoch: batchSizes.length,
      sampleFloats: sampleSize(sampleShape),
      targetFloats: 1,
    }),
  );
  const size = batchSizes.reduce((a, b) => a + b, 0);
  const withdraw = publishRing(key, { ring: ring.spec, size, sampleShape, classes: labels.classes() });
  open.set(key, { ring, withdraw });
  await ring.put(0, first.samples, first.targets, first.count);
  void stream
    .produce(ring, Number.POSITIVE_INFINITY, batchSizes)
    .catch((err: unknown) => ring.fail(err instanceof Error ? err.message : String(err)));
  return ringDataset(key);
}

/** ys as one label per sample; the classes the labels seen imply. */
function labelReading(file: string): { reading: BatchReading; classes(): number } {
  let largest = -1,
    integral = true;
  const reading: BatchReading = {
    who: `data module ${file}`,
    targets(ys, index) {
      const perSample = ys.shape.slice(1);
      if (ys.rank === 0 || perSample.some(d => d !== 1))
        throw new TandemError(
          'BAD_DATA',
          `data module ${file}: element ${index}'s ys has shape [${ys.shape.join(', ')}]; tandem takes a dataset ` +
            'of batches { xs: [batch, ...sample], ys: [batch] } of one label (or float target) per sample: batch ' +
            'it with dataset.batch(size)',
        );
      const values = Float32Array.from(ys.dataSync());
      for (const v of values) {
        if (!Number.isFinite(v))
          throw new TandemError('BAD_DATA', `data module ${file}: batch ${index} has label ${v}, not a finite number`);
        if (Number.isInteger(v) && v >= 0) largest = Math.max(largest, v);
        else integral = false;
      }
      return { values };
    },
  };
  return { reading, classes: () => (integral ? largest + 1 : 1) };
}
