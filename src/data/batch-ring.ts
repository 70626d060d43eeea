/**
 * A bounded ring of batches in one SharedArrayBuffer: a producer (the thread that iterates a `tf.data.Dataset`)
 * writes batch `seq` into slot `seq % depth` once that slot is free; the loader threads read each sample of the
 * global batch of step `seq + 1` out of it into the devices' input slots, and the last sample read frees the slot.
 * A reader that wants a batch past the producer's (a run resumed at a checkpoint's step) raises `wanted`: the producer
 * then skips ahead to it, and slots of batches before it count as free. Waits are Atomics waits with a way out: the
 * ring closed or failed.
 * Memory: `depth × batch × (sampleFloats + targetFloats) × 4` bytes, whatever the dataset's length.
 */
import { TandemError } from '../errors.js';

/** What a reader needs to rebuild the ring on its thread: serialisable (the buffer is shared, not copied). */
export interface BatchRingSpec {
  buffer: SharedArrayBuffer;
  depth: number;
  /** Samples of a full batch. */
  batch: number;
  batchesPerEpoch: number;
  sampleFloats: number;
  /** Floats of one sample's target (1: a label or a float target). */
  targetFloats: number;
  /** Several hosts, each streaming only its share of every global batch: this host's (absent: whole batches). */
  share?: HostShare;
}

/**
 * Host `host` of `hosts` streams, of each global batch of `s` samples (`globalBatch`, or fewer in an epoch's last
 * batch of `epochSamples`), the samples `shardRange(s, hosts, host)`: its devices' part, in order.
 */
export interface HostShare {
  hosts: number;
  host: number;
  globalBatch: number;
  epochSamples: number;
}

const RUNNING = 0,
  CLOSED = 1,
  FAILED = 2;
const STATE = 0,
  RELEASED = 1,
  WANTED = 2,
  HEADER = 3;
/** Bytes kept for a failure's message. */
const MESSAGE_BYTES = 2048;
/** Longest single wait before the ring's state is looked at again (ms). */
const WAIT_SLICE_MS = 200;

/** What a run on a streamed dataset must give, to read its batches in its order. */
export const IN_ORDER = (batch: number) =>
  `a streamed tf.data dataset is trained in its own order and batches: give --batch ${batch} (its batch size), ` +
  '--no-shuffle (shuffle: false; shuffle in the pipeline with dataset.shuffle), and --partial-batch when its last ' +
  'batch is smaller';

/** The spec of a new ring of `depth` batches. */
export function allocateBatchRing(shape: Omit<BatchRingSpec, 'buffer'>): BatchRingSpec {
  const { depth, batch, sampleFloats, targetFloats } = shape;
  const ints = HEADER + 3 * depth;
  const floats = depth * batch * (sampleFloats + targetFloats);
  const buffer = new SharedArrayBuffer(ints * 4 + MESSAGE_BYTES + floats * 4);
  new Int32Array(buffer, HEADER * 4, depth).fill(-1); // every slot empty
  return { ...shape, buffer };
}

/** Bytes of the ring a spec describes: the read-ahead's memory. */
export function batchRingBytes(spec: Omit<BatchRingSpec, 'buffer'>): number {
  return spec.depth * spec.batch * (spec.sampleFloats + spec.targetFloats) * 4;
}

export class BatchRing {
  private readonly ints: Int32Array;
  private readonly floats: Float32Array;
  private readonly message: Uint8Array;
  /** Floats of one slot: its samples, then their targets. */
  private readonly slotFloats: number;

  constructor(readonly spec: BatchRingSpec) {
    const { buffer, depth, batch, sampleFloats, targetFloats } = spec;
    const ints = HEADER + 3 * depth;
    this.ints = new Int32Array(buffer, 0, ints);
    this.message = new Uint8Array(buffer, ints * 4, MESSAGE_BYTES);
    this.slotFloats = batch * (sampleFloats + targetFloats);
    this.floats = new Float32Array(buffer, ints * 4 + MESSAGE_BYTES, depth * this.slotFloats);
  }

  /** Batches fully read so far: the next batch to read is at least this one. */
  get released(): number {
    return Atomics.load(this.ints, RELEASED);
  }

  /** The first batch a reader has asked for: the producer skips the batches before it. */
  get wanted(): number {
    return Atomics.load(this.ints, WANTED);
  }

  /** Whether the ring was closed or failed. */
  get ended(): boolean {
    return this.state !== RUNNING;
  }

  /** Producer: batch `seq` of `count` samples into its slot, once free; false when the ring closed meanwhile. */
  async put(seq: number, samples: Float32Array, targets: Float32Array, count: number): Promise<boolean> {
    const { depth, batch, sampleFloats, targetFloats } = this.spec;
    const k = seq % depth,
      at = this.seqAt(k);
    for (
      let held = Atomics.load(this.ints, at);
      held !== -1 && held >= this.wanted;
      held = Atomics.load(this.ints, at)
    ) {
      if (this.state !== RUNNING) return false;
      await Atomics.waitAsync(this.ints, at, held, WAIT_SLICE_MS).value;
    }
    if (this.state !== RUNNING) return false;
    const base = k * this.slotFloats;
    this.floats.set(samples.subarray(0, count * sampleFloats), base);
    this.floats.set(targets.subarray(0, count * targetFloats), base + batch * sampleFloats);
    Atomics.store(this.ints, this.countAt(k), count);
    Atomics.store(this.ints, this.consumedAt(k), 0);
    Atomics.store(this.ints, at, seq);
    Atomics.notify(this.ints, at);
    return true;
  }

  /**
   * Reader: sample `index` of the epoch, in the batch of step `step`, into `out` at `offset`; its target into `target`
   * at `targetAt` (if given).
   */
  readSample(
    step: number,
    index: number,
    out: Float32Array | undefined,
    offset: number,
    target?: Float32Array,
    targetAt = 0,
  ): void {
    const k = this.waitFor(step, index);
    const i = this.inSlot(step - 1, index);
    if (i < 0 || i >= Atomics.load(this.ints, this.countAt(k)))
      throw new TandemError(
        'BAD_DATA',
        `streamed dataset: sample ${index} is past the end of its batch` +
          (this.spec.share ? ` or not in host ${this.spec.share.host}'s share of it` : ''),
      );
    this.copyOut(k, i, out, offset, target, targetAt);
  }

  /** Sample `i` of slot `k` into `out` at `offset`, its target into `target` at `targetAt` (if given). */
  private copyOut(
    k: number,
    i: number,
    out: Float32Array | undefined,
    offset: number,
    target?: Float32Array,
    targetAt = 0,
  ): void {
    const { batch, sampleFloats, targetFloats } = this.spec;
    const base = k * this.slotFloats;
    out?.set(this.floats.subarray(base + i * sampleFloats, base + (i + 1) * sampleFloats), offset);
    if (target) {
      const t = base + batch * sampleFloats + i * targetFloats;
      target.set(this.floats.subarray(t, t + targetFloats), targetAt);
    }
  }

  /** Reader: one sample of the batch of step `step` is read; its last sample frees the slot. */
  consumed(step: number, index: number): void {
    const k = this.waitFor(step, index);
    const count = Atomics.load(this.ints, this.countAt(k));
    if (Atomics.add(this.ints, this.consumedAt(k), 1) + 1 < count) return;
    Atomics.add(this.ints, RELEASED, 1);
    Atomics.store(this.ints, this.seqAt(k), -1);
    Atomics.notify(this.ints, this.seqAt(k));
  }

  /** Sample `index` of batch 0 while batch 0 is in the ring and not read (the main thread's probes). */
  peekFirst(
    index: number,
    out: Float32Array | undefined,
    offset: number,
    target?: Float32Array,
    targetAt = 0,
  ): boolean {
    const full = this.spec.share?.globalBatch ?? this.spec.batch;
    if (Atomics.load(this.ints, this.seqAt(0)) !== 0 || this.released + this.wanted !== 0 || index >= full)
      return false;
    const count = Atomics.load(this.ints, this.countAt(0));
    const i = this.inSlot(0, index);
    // another host's sample (this host streams its share only): one of this host's stands in for the probes
    this.copyOut(0, i >= 0 && i < count ? i : index % count, out, offset, target, targetAt);
    return true;
  }

  /** No more batches: every waiting side returns (readers throw). */
  close(): void {
    Atomics.compareExchange(this.ints, STATE, RUNNING, CLOSED);
    this.wakeAll();
  }

  /** The producer failed: readers throw `message`. */
  fail(message: string): void {
    const bytes = new TextEncoder().encode(message).subarray(0, MESSAGE_BYTES - 1);
    this.message.fill(0);
    this.message.set(bytes);
    Atomics.store(this.ints, STATE, FAILED);
    this.wakeAll();
  }

  private get state(): number {
    return Atomics.load(this.ints, STATE);
  }

  /** The slot of step `step`'s batch (sample `index` of the epoch), once the producer has written it. */
  private waitFor(step: number, index: number): number {
    const { depth, batchesPerEpoch } = this.spec;
    const batch = this.spec.share?.globalBatch ?? this.spec.batch;
    const seq = step - 1;
    if ((seq % batchesPerEpoch) * batch !== index - (index % batch))
      throw new TandemError(
        'BAD_CONFIG',
        `streamed dataset: sample ${index} is not in the batch of step ${step}; ` + `${IN_ORDER(batch)}`,
      );
    this.want(seq);
    const k = seq % depth,
      at = this.seqAt(k);
    for (let held = Atomics.load(this.ints, at); held !== seq; held = Atomics.load(this.ints, at)) {
      this.throwIfEnded(seq);
      Atomics.wait(this.ints, at, held, WAIT_SLICE_MS);
    }
    return k;
  }

  /** Where sample `index` of the epoch (in batch `seq`) is in its slot: its place in this host's share. */
  private inSlot(seq: number, index: number): number {
    const { share, batch, batchesPerEpoch } = this.spec;
    if (!share) return index % batch;
    const { globalBatch, epochSamples, hosts, host } = share;
    const samples = Math.min(globalBatch, epochSamples - (seq % batchesPerEpoch) * globalBatch);
    return (index % globalBatch) - Math.floor((host * samples) / hosts);
  }

  /** `wanted` raised to `seq` (the producer woken to skip ahead when it was behind). */
  private want(seq: number): void {
    for (let was = this.wanted; was < seq; was = this.wanted)
      if (Atomics.compareExchange(this.ints, WANTED, was, seq) === was) return this.wakeAll();
  }

  private throwIfEnded(seq: number): void {
    const state = this.state;
    if (state === RUNNING) return;
    if (state === FAILED) {
      const end = this.message.indexOf(0);
      const text = new TextDecoder().decode(this.message.slice(0, end < 0 ? MESSAGE_BYTES : end));
      throw new TandemError('DATA_FAILED', text);
    }
    throw new TandemError('DATA_FAILED', `streamed dataset: the stream was closed before batch ${seq} came`);
  }

  private wakeAll(): void {
    for (let k = 0; k < this.spec.depth; k++) Atomics.notify(this.ints, this.seqAt(k));
  }

  private seqAt(k: number): number {
    return HEADER + k;
  }
  private countAt(k: number): number {
    return HEADER + this.spec.depth + k;
  }
  private consumedAt(k: number): number {
    return HEADER + 2 * this.spec.depth + k;
  }
}
