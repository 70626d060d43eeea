/**
 * Method B's dedicated loaders: device d draws only samples whose labels it
 * owns. Each device has its own shuffled stream from the seed (a permutation
 * of its own samples per epoch) and its own epoch counter: when its share
 * runs out it starts its next epoch on its own, mid-batch if need be. A step
 * takes `perDevice` samples from every device's stream.
 */
import { prng } from './synthetic-images.js';
import type { ShardSampler } from './shard-loader.js';

export class LocalLabelSampler implements ShardSampler {
  private readonly streams: { indices: Int32Array; epoch: number; permutation: Int32Array }[];

  /** `owned[d]` = dataset indices whose labels device d owns. */
  constructor(
    owned: Int32Array[],
    readonly perDevice: number,
    readonly seed: number,
  ) {
    this.streams = owned.map(indices => ({ indices, epoch: -1, permutation: new Int32Array(0) }));
  }

  /** Epoch of device d's stream at the start of step `step` (from 1). */
  epochOf(step: number, device: number): number {
    return Math.floor(((step - 1) * this.perDevice) / this.streams[device].indices.length);
  }

  shardIndices(step: number, device: number): Int32Array {
    const stream = this.streams[device];
    const n = stream.indices.length;
    const out = new Int32Array(this.perDevice);
    for (let i = 0; i < this.perDevice; i++) {
      const position = (step - 1) * this.perDevice + i;
      const epoch = Math.floor(position / n);
      if (epoch !== stream.epoch) {
        stream.permutation = shuffled(stream.indices, this.seed * 7907 + device * 104729 + epoch);
        stream.epoch = epoch;
      }
      out[i] = stream.permutation[position % n];
    }
    return out;
  }
}

function shuffled(values: Int32Array, seed: number): Int32Array {
  const p = Int32Array.from(values);
  const r = prng(seed);
  for (let i = p.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    const t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
  return p;
}
