/**
 * A data module whose factory returns a `tf.data.Dataset` of `{ xs, ys }` batches, streamed: on the main thread (the
 * run's prepare phase) the dataset is counted once (one pass, keeping nothing), batch 0 goes into a `BatchRing`
 * published to the loader threads started afterwards, and the rest is read ahead into it, pass after pass, while
 * the run trains; on a loader thread the module's dataset is not iterated at all: the ring is read. `ys`: one label
 * (class id, or a float target for a regression) per sample, of shape [batch] or [batch, 1]; the classes are the
 * largest label + 1 when every label is a non-negative integer, else 1. Several hosts: a dataset of batches of
 * `--batch / hosts` is this host's share of each global batch (the ring maps the devices' samples into it); the
 * hosts agree on the epoch before step 1 (trainer/agree-streamed-epoch.ts), which may start the stream again cut
 * to it (`cutStreamedEpoch`).
 */
import { isMainThread } from 'node:worker_threads';
import type * as tfNs from '@tensorflow/tfjs';
import { TandemError } from '../errors.js';
import type { Dataset, DatasetSpec } from './dataset.js';
import { sampleSize } from './dataset.js';
import { allocateBatchRing, BatchRing } from './batch-ring.js';
import type { BatchArrays, BatchReading, DatasetStream, StreamShape } from './dataset-stream.js';
import { publishRing, ringDataset } from './ring-dataset.js';

/** Batches read ahead of training for a data module's tf.data dataset: the ring's depth. */
export const MODULE_READ_AHEAD = 3;

/** Whether a data factory returned a `tf.data.Dataset` (by shape: tfjs may be another copy of the package). */
export function isTfDataset(value: unknown): value is tfNs.data.Dataset<tfNs.TensorContainer> {
  const v = value as { iterator?: unknown; batch?: unknown; size?: unknown } | null;
  return typeof v === 'object' && v !== null && typeof v.iterator === 'function' && typeof v.batch === 'function';
}

/** A stream this thread fills: its ring, and what it takes to start it again cut to an agreed epoch. */
interface OpenStream {
  ring: BatchRing;
  withdraw: () => void;
  epoch: StreamedEpoch;
  /** The stream started again from a fresh pass, each epoch cut to `sizes` (see cutStreamedEpoch). */
  cut(sizes: number[], globalSizes: number[]): Promise<void>;
}

/** A streamed module's epoch on this host, as counted before training. */
export interface StreamedEpoch {
  /** The samples of each batch this host's dataset gives. */
  sizes: number[];
  /**
   * Whether each is this host's share of a global batch (several hosts, batches of `--batch / hosts`); else whole
   * global batches.
   */
  shares: boolean;
  /** The global batches the ring was made for: `sizes`, or with shares the global batches they are taken to be. */
  globalSizes: number[];
  /** The first label that is no class (negative or fractional: `batch 2 has label -1`), when one is. */
  notAClass?: string;
}

/** Closes the ring of the previous run on the same spec (a producer left waiting on it returns). */
const open = new Map<string, OpenStream>();

/** This host's epoch, when `spec` is a data module streamed on this thread (else undefined). */
export function streamedEpoch(spec: DatasetSpec): StreamedEpoch | undefined {
  return open.get(JSON.stringify(spec))?.epoch;
}

/**
 * The stream of `spec` started again from a fresh pass, each epoch `sizes` batches of those sizes (this host's, each
 * no larger than its dataset's; the rest of each pass is read and left) and `globalSizes` the global batches they are
 * (shares) or are; the loader threads started from now on read the new ring.
 */
export async function cutStreamedEpoch(spec: DatasetSpec, sizes: number[], globalSizes: number[]): Promise<void> {
  const stream = open.get(JSON.stringify(spec));
  if (!stream) throw new TandemError('BAD_DATA', `data module ${spec.source}: no stream to cut (tandem bug)`);
  await stream.cut(sizes, globalSizes);
}

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
  const counted = new (await streamClass())(dataset, labels.reading);
  // the counting pass sees every label
  const { shape, first } = await counted.open('return a dataset that ends (no repeat(): each epoch is a new pass)');
  const { hosts = 1, batch } = spec.options;
  const shares = hosts > 1 && batch !== undefined && shape.batch * hosts === batch;
  const own = shape.batchSizes;
  // until the hosts agree (agree-streamed-epoch.ts), a last share of c samples stands for a global batch of c × hosts
  const globalSizes = shares ? own.map(c => (c === shape.batch ? batch : c * hosts)) : own;
  const notAClass = labels.notAClass();
  const epoch = { sizes: own, shares, globalSizes, ...(notAClass ? { notAClass } : {}) };
  const source: StreamSource = { key, options: spec.options, dataset, labels, shape, epoch };
  await startStream(source, own, globalSizes, { stream: counted, first });
  return ringDataset(key);
}

/**
 * The stream's class, imported when a stream is made: it loads tfjs, and every loader thread loads this module (only a
 * main thread streams).
 */
async function streamClass(): Promise<typeof DatasetStream> {
  return (await import('./dataset-stream.js')).DatasetStream;
}

/** What a streamed module's ring is made from. */
interface StreamSource {
  key: string;
  options: DatasetSpec['options'];
  dataset: tfNs.data.Dataset<tfNs.TensorContainer>;
  labels: ReturnType<typeof labelReading>;
  shape: StreamShape;
  epoch: StreamedEpoch;
}

/** A ring for `source`, published, its producer streaming epochs of `sizes` (a fresh pass unless `opened`). */
async function startStream(
  source: StreamSource,
  sizes: number[],
  globalSizes: number[],
  opened?: { stream: DatasetStream; first: BatchArrays },
): Promise<void> {
  const { key, dataset, labels, shape, epoch } = source;
  open.get(key)?.ring.close();
  open.get(key)?.withdraw();
  const stream = opened?.stream ?? new (await streamClass())(dataset, labels.reading);
  const first = opened?.first ?? (await stream.reopen());
  const epochSamples = globalSizes.reduce((a, b) => a + b, 0);
  const { hosts = 1, hostRank = 0, batch = shape.batch } = source.options;
  const ring = new BatchRing(
    allocateBatchRing({
      depth: MODULE_READ_AHEAD,
      batch: shape.batch,
      batchesPerEpoch: sizes.length,
      sampleFloats: sampleSize(shape.sampleShape),
      targetFloats: 1,
      ...(epoch.shares ? { share: { hosts, host: hostRank, globalBatch: batch, epochSamples } } : {}),
    }),
  );
  const meta = { ring: ring.spec, size: epochSamples, sampleShape: shape.sampleShape, classes: labels.classes() };
  const withdraw = publishRing(key, meta);
  open.set(key, { ring, withdraw, epoch, cut: (s, g) => startStream(source, s, g) });
  await ring.put(0, first.samples, first.targets, sizes[0]);
  void stream
    .produce(ring, Number.POSITIVE_INFINITY, sizes, epoch.sizes)
    .catch((err: unknown) => ring.fail(err instanceof Error ? err.message : String(err)));
}

/** ys as one label per sample; the classes the labels seen imply. */
function labelReading(file: string): { reading: BatchReading; classes(): number; notAClass(): string | undefined } {
  let largest = -1,
    integral = true,
    notAClass: string | undefined;
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
        else {
          integral = false;
          notAClass ??= `batch ${index} has label ${v}`;
        }
      }
      return { values };
    },
  };
  return { reading, classes: () => (integral ? largest + 1 : 1), notAClass: () => notAClass };
}
