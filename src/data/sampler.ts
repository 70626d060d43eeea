/**
 * Which samples make up each global batch, and which shard of it each device
 * gets (a distributed sampler). Every epoch is a seeded permutation of the
 * dataset (`shuffle` false: the samples in their order, as tfjs's `model.fit`
 * with `shuffle: false`). The incomplete last batch of an epoch is dropped, so
 * that every global batch has exactly `batch` samples and each device
 * `batch / devices`; or, with `partialBatch`, trained as tfjs's `model.fit`
 * trains it: its samples split over the devices as evenly as they can be (a
 * device may get none).
 */
import { prng } from './synthetic-images.js';

export class GlobalBatchSampler {
  readonly devices: number;
  readonly stepsPerEpoch: number;
  private epoch = -1;
  private permutation: Int32Array = new Int32Array(0);

  constructor(
    readonly datasetSize: number,
    readonly batch: number,
    readonly seed: number,
    devices = 1,
    readonly shuffle = true,
    readonly partialBatch = false,
  ) {
    this.stepsPerEpoch = stepsPerEpochOf(datasetSize, batch, partialBatch);
    this.devices = devices;
  }

  /** Indices of global batch `step` (counted from 1). */
  batchIndices(step: number): Int32Array {
    const epoch = Math.floor((step - 1) / this.stepsPerEpoch);
    if (epoch !== this.epoch) {
      this.permutation = this.shuffle ? permute(this.datasetSize, this.seed * 31 + epoch) : inOrder(this.datasetSize);
      this.epoch = epoch;
    }
    const first = ((step - 1) % this.stepsPerEpoch) * this.batch;
    return this.permutation.slice(first, first + this.batch);
  }

  /** Device `device`'s contiguous shard of global batch `step`. */
  shardIndices(step: number, device: number): Int32Array {
    const indices = this.batchIndices(step);
    const [from, count] = shardRange(indices.length, this.devices, device);
    return indices.slice(from, from + count);
  }
}

/** Global batches in an epoch of `samples`: the full ones, and with `partialBatch` the smaller last one. */
export function stepsPerEpochOf(samples: number, batch: number, partialBatch: boolean): number {
  return partialBatch ? Math.ceil(samples / batch) : Math.floor(samples / batch);
}

/** Samples in global batch `step` (from 1): `batch`, or fewer in an epoch's partial last batch. */
export function batchSamplesAt(samples: number, batch: number, partialBatch: boolean, step: number): number {
  const inEpoch = (step - 1) % stepsPerEpochOf(samples, batch, partialBatch);
  return Math.min(batch, samples - inEpoch * batch);
}

/**
 * [first, count] of device `device`'s contiguous shard of a global batch of `samples`: `samples / devices` each when
 * it divides, else as even as can be (the counts differ by at most one; a device may get none).
 */
export function shardRange(samples: number, devices: number, device: number): [number, number] {
  const from = Math.floor((device * samples) / devices);
  return [from, Math.floor(((device + 1) * samples) / devices) - from];
}

function inOrder(n: number): Int32Array {
  const p = new Int32Array(n);
  for (let i = 0; i < n; i++) p[i] = i;
  return p;
}

function permute(n: number, seed: number): Int32Array {
  const p = new Int32Array(n);
  for (let i = 0; i < n; i++) p[i] = i;
  const r = prng(seed);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    const t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
  return p;
}
