/**
 * A streamed dataset as tandem's loader threads read it: a `Dataset` whose samples come out of a `BatchRing` that
 * another thread fills from a `tf.data.Dataset`. The ring travels to the loader threads as worker environment data
 * (set before their pool starts), under a key the generated data module names. On the thread that fills the ring
 * (the main thread), only batch 0 can be read, before training: what the run's checks before step 1 read.
 */
import { getEnvironmentData, isMainThread, setEnvironmentData } from 'node:worker_threads';
import { TandemError } from '../errors.js';
import { BatchRing, IN_ORDER, type BatchRingSpec } from './batch-ring.js';
import type { Dataset } from './dataset.js';

/** What the loader threads need besides the ring: the dataset's shape, as the trainer sees it. */
export interface RingDatasetMeta {
  ring: BatchRingSpec;
  /** Samples in one epoch. */
  size: number;
  sampleShape: number[];
  classes: number;
  /** Targets of a shape (absent: one label or float target per sample). */
  targetShape?: number[];
}

const PREFIX = 'tandem-batch-ring:';

/** A streamed dataset's hook, called by a loader before it reads a shard: the step whose batch it reads. */
export const STREAM_STEP = Symbol.for('tandem.streamStep');

/** Whether `ds` is a streamed dataset (read out of a ring: by loader threads only). */
export function isStreamed(ds: Dataset): boolean {
  return STREAM_STEP in ds;
}

/** Tells `ds`, when it is a streamed dataset, the step whose samples are read next on this thread. */
export function setStreamStep(ds: Dataset, step: number): void {
  (ds as { [STREAM_STEP]?: (step: number) => void })[STREAM_STEP]?.(step);
}

/** Publishes `meta` to threads started from now on, under `key`; the returned function withdraws it. */
export function publishRing(key: string, meta: RingDatasetMeta): () => void {
  setEnvironmentData(PREFIX + key, meta as never);
  return () => setEnvironmentData(PREFIX + key, undefined as never);
}

/** The dataset of the ring published under `key` (the generated data module's factory). */
export function ringDataset(key: string): Dataset {
  const meta = getEnvironmentData(PREFIX + key) as RingDatasetMeta | undefined;
  if (!meta)
    throw new TandemError(
      'BAD_DATA',
      `streamed dataset '${key}': no ring on this thread; a streamed dataset is read only by the run that made it`,
    );
  const ring = new BatchRing(meta.ring);
  const base = { size: meta.size, sampleShape: meta.sampleShape, classes: meta.classes };
  const label = new Float32Array(1);
  let step = 0; // set by the loader before each shard
  const fromRing = (
    index: number,
    out: Float32Array | undefined,
    offset: number,
    target?: Float32Array,
    at = 0,
  ): void => {
    if (!isMainThread) {
      if (step === 0) throw new TandemError('BAD_DATA', 'streamed dataset: read before its step was set (loader bug)');
      return ring.readSample(step, index, out, offset, target, at);
    }
    if (!ring.peekFirst(index, out, offset, target, at))
      throw new TandemError(
        'BAD_DATA',
        `streamed dataset: sample ${index} read on the thread that fills the ring; only batch 0 can be read there ` +
          `(${IN_ORDER(meta.ring.batch)}; method data-parallel)`,
      );
  };
  const done = (index: number) => (isMainThread ? undefined : ring.consumed(step, index));
  const hook = { [STREAM_STEP]: (s: number) => void (step = s) };
  if (meta.targetShape)
    return {
      ...base,
      ...hook,
      targetShape: meta.targetShape,
      read: (index, out, offset) => (fromRing(index, out, offset), 0),
      readTarget: (index, out, offset) => {
        fromRing(index, undefined, 0, out, offset);
        done(index);
      },
    };
  return {
    ...base,
    ...hook,
    read: (index, out, offset) => {
      fromRing(index, out, offset, label, 0);
      done(index);
      return label[0];
    },
  };
}
