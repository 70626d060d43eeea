/**
 * Which samples make up each global batch, and which shard of it each device
 * gets (a distributed sampler). Every epoch is a seeded permutation of the
 * dataset (`shuffle` false: the samples in their order, as tfjs's `model.fit`
 * with `shuffle: false`); the incomplete last batch of an epoch is dropped, so
 * every global batch has exactly `batch` samples and each device
 * `batch / devices`.
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
  ) {
    this.stepsPerEpoch = Math.floor(datasetSize / batch);
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
    const per = this.batch / this.devices;
    return this.batchIndices(step).slice(device * per, (device + 1) * per);
  }
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
