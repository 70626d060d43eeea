/**
 * A `tf.data.Dataset` of `{ xs, ys }` batches streamed into a `BatchRing` on the thread that made it, as tfjs's
 * `model.fitDataset` iterates it: without `batchesPerEpoch`, a new iterator every epoch, each pass the same number of
 * batches (counted by one pass before training, which keeps nothing); with it, one iterator for the whole fit,
 * `batchesPerEpoch` batches an epoch. Every batch has the first one's size, but an epoch's last may be smaller.
 */
import * as tf from '#tfjs';
import { TandemError } from '../errors.js';
import { firstNonFinite } from '../engine/non-finite.js';
import type { BatchRing } from './batch-ring.js';

/** One batch's ys as the devices read them: one label (or float target) per sample, or targets of a shape. */
export interface BatchTargets {
  values: Float32Array;
  targetShape?: number[];
}

/** How a batch's tensors are read: its xs checked (samples of the model's input), its ys as targets. */
export interface BatchReading {
  /** Who reads (named in errors): `fitDataset`, or the data module's path. */
  who: string;
  /** The model's input shape without the batch dimension (null: any size), when known. */
  inputShape?: (number | null)[];
  targets(ys: tf.Tensor, index: number): BatchTargets;
}

/** One batch as the ring takes it. */
export interface BatchArrays {
  samples: Float32Array;
  targets: Float32Array;
  count: number;
}

/** What one pass of the dataset is, as training sees it. */
export interface StreamShape {
  /** Samples of batch 0 (a full batch). */
  batch: number;
  /** Samples of each batch of an epoch, in order. */
  batchSizes: number[];
  sampleShape: number[];
  /** Targets of a shape (absent: one label or float target per sample). */
  targetShape?: number[];
  /** Batch 0's targets as tandem reads them (classWeight's check). */
  firstY: BatchTargets;
}

/** Batches counted before the first note that the counting pass goes on (then at every power of 10). */
export const COUNTING_NOTE = 10_000;

/** Reads a dataset's batches as `model`'s devices train them, checking each against batch 0. */
export class DatasetStream {
  private shape?: Omit<StreamShape, 'batchSizes'>;
  private iterator?: Awaited<ReturnType<tf.data.Dataset<tf.TensorContainer>['iterator']>>;
  /** Batches the current iterator has given. */
  private given = 0;

  constructor(
    private readonly dataset: tf.data.Dataset<tf.TensorContainer>,
    private readonly reading: BatchReading,
    private readonly batchesPerEpoch?: number,
  ) {}

  /**
   * Batch 0 read and checked, and the sizes of an epoch's batches (one counting pass without batchesPerEpoch).
   * `endless`: what to do instead of counting a dataset tfjs knows never ends (its size Infinity, a `repeat()`).
   */
  async open(endless = 'give batchesPerEpoch'): Promise<{ shape: StreamShape; first: BatchArrays }> {
    if (this.batchesPerEpoch === undefined && this.dataset.size === Infinity)
      throw new TandemError(
        'BAD_DATA',
        `${this.reading.who}: the dataset never ends (its size is Infinity: a repeat() without a count), and an ` +
          `epoch is one pass of it, counted before training; ${endless}`,
      );
    this.iterator = await this.dataset.iterator();
    const first = await this.next();
    if (!first) throw new TandemError('BAD_DATA', `${this.reading.who}: the dataset gave no batch`);
    const shape = this.shape!;
    if (this.batchesPerEpoch !== undefined)
      return { shape: { ...shape, batchSizes: new Array<number>(this.batchesPerEpoch).fill(shape.batch) }, first };
    const batchSizes = [first.count];
    for (let b = await this.next(); b; b = await this.next()) {
      batchSizes.push(b.count);
      if (batchSizes.length >= COUNTING_NOTE && Number.isInteger(Math.log10(batchSizes.length)))
        console.warn(
          `warning: ${this.reading.who}: still counting the dataset's first pass before training, ` +
            `${batchSizes.length} batches so far; if it never ends (a generator that loops, a repeat()), ${endless}`,
        );
    }
    this.refuseShortBatch(batchSizes);
    this.iterator = await this.dataset.iterator();
    this.given = 0;
    const again = await this.next(); // the first epoch's batch 0: the ring's first
    if (!again) throw new TandemError('BAD_DATA', `${this.reading.who}: a second pass of the dataset gave no batch`);
    return { shape: { ...shape, batchSizes }, first: again };
  }

  /**
   * Batch 0 of a fresh pass, when the pass's batches are already known (`open` counted them): a stream that starts
   * again, cut to an epoch the hosts agreed on (agree-streamed-epoch.ts).
   */
  async reopen(): Promise<BatchArrays> {
    this.iterator = await this.dataset.iterator();
    this.given = 0;
    const first = await this.next();
    if (!first) throw new TandemError('BAD_DATA', `${this.reading.who}: a second pass of the dataset gave no batch`);
    return first;
  }

  /**
   * Batches 1 … `total - 1` into `ring` (batch 0 is `open`'s), a new pass at each epoch's start without
   * batchesPerEpoch; stops when the ring closes. `passSizes`: the batches a pass gives, when the epoch trained is
   * cut shorter (`batchSizes`, the hosts' agreed epoch: each pass is left after its batches, each batch cut to its
   * size).
   */
  async produce(
    ring: BatchRing,
    total: number,
    batchSizes: readonly number[],
    passSizes: readonly number[] = batchSizes,
  ): Promise<void> {
    const perEpoch = batchSizes.length;
    const cut = passSizes.length !== perEpoch;
    for (let seq = 1; seq < total; seq++) {
      const place = seq % perEpoch;
      if (place === 0 && this.batchesPerEpoch === undefined) {
        if (!cut) await this.endOfPass(perEpoch, seq / perEpoch);
        this.iterator = await this.dataset.iterator();
        this.given = 0;
      }
      const b = await this.next();
      if (!b) throw this.ranOut(seq, perEpoch, total);
      if (seq < ring.wanted) continue; // a resumed run: the batches before its step are read and left
      if (b.count !== passSizes[place]) throw this.otherSize(seq, perEpoch, b.count, passSizes[place]);
      if (!(await ring.put(seq, b.samples, b.targets, batchSizes[place]))) return;
    }
  }

  /** The next batch, checked and as arrays (its tensors disposed); undefined at the end of the pass. */
  private async next(): Promise<BatchArrays | undefined> {
    const out = await this.iterator!.next();
    if (out.done) return undefined;
    const index = this.given++;
    const value = out.value as Partial<{ xs: unknown; ys: unknown }>;
    try {
      return this.arrays(value, index);
    } finally {
      tf.dispose(out.value);
    }
  }

  private arrays(value: Partial<{ xs: unknown; ys: unknown }>, index: number): BatchArrays {
    const xs = this.tensorOf(value?.xs, 'xs', index);
    const ys = this.tensorOf(value?.ys, 'ys', index);
    this.checkIsBatch(xs, index);
    const count = xs.shape[0];
    const y = this.reading.targets(ys, index);
    if (!this.shape)
      this.shape = { batch: count, sampleShape: xs.shape.slice(1), targetShape: y.targetShape, firstY: y };
    const s = this.shape;
    if (count > s.batch)
      throw new TandemError(
        'BAD_DATA',
        `${this.reading.who}: batch ${index} has ${count} samples and batch 0 ${s.batch}; tandem trains batches of ` +
          `one size ` +
          '(only the last may be smaller): batch the dataset with dataset.batch(size)',
      );
    if (ys.shape[0] !== count)
      throw new TandemError('BAD_DATA', `${this.reading.who}: batch ${index} has ${count} xs and ${ys.shape[0]} ys`);
    if (String(y.targetShape) !== String(s.targetShape))
      throw new TandemError(
        'BAD_DATA',
        `${this.reading.who}: batch ${index}'s ys are read as ${shapeWords(y.targetShape)}, and batch 0's as ` +
          `${shapeWords(s.targetShape)}; give ys of one kind in every batch`,
      );
    const samples = xs.dataSync() as Float32Array;
    this.refuseNonFinite(samples, index, count);
    return { samples, targets: y.values, count };
  }

  /** An element's `xs` or `ys` (`key`): a tensor of numbers, else BAD_DATA saying what it is. */
  private tensorOf(v: unknown, key: 'xs' | 'ys', index: number): tf.Tensor {
    if (v instanceof tf.Tensor && v.dtype !== 'string' && v.dtype !== 'complex64') return v;
    const what = v === undefined ? 'missing' : v instanceof tf.Tensor ? `a tensor of ${v.dtype}` : typeof v;
    throw new TandemError(
      'BAD_DATA',
      `${this.reading.who}: element ${index}'s ${key} is ${what}; each element must be { xs, ys } of tensors of ` +
        'numbers, as model.fitDataset takes them',
    );
  }

  /** Elements of one sample each (not batched) are refused, naming the fix. */
  private checkIsBatch(xs: tf.Tensor, index: number): void {
    const input = this.reading.inputShape ?? xs.shape.slice(1);
    const matches = (shape: number[]) =>
      shape.length === input.length && shape.every((d, i) => input[i] === null || input[i] === d);
    if (matches(xs.shape.slice(1)) && (!this.shape || String(xs.shape.slice(1)) === String(this.shape.sampleShape)))
      return;
    const sample = matches(xs.shape);
    throw new TandemError(
      'BAD_DATA',
      sample
        ? `${this.reading.who}: element ${index}'s xs has shape [${xs.shape.join(', ')}], one sample of the model's ` +
            `input ` +
            `[${input.join(', ')}]: tandem takes a dataset of batches, as model.fitDataset does; batch it ` +
            'with dataset.batch(size)'
        : `${this.reading.who}: batch ${index}'s xs has shape [${xs.shape.join(', ')}]; the model's input is ` +
            `[batch, ${input.join(', ')}]` +
            (this.shape ? ` and batch 0's samples [${this.shape.sampleShape.join(', ')}]` : ''),
    );
  }

  /** Only a pass's last batch may be smaller than batch 0 (the ring places batch b's samples at b × batch). */
  private refuseShortBatch(batchSizes: number[]): void {
    const short = batchSizes.findIndex((n, b) => b < batchSizes.length - 1 && n < batchSizes[0]);
    if (short < 0) return;
    throw new TandemError(
      'BAD_DATA',
      `${this.reading.who}: batch ${short} of the dataset's ${batchSizes.length} has ${batchSizes[short]} samples ` +
        `and batch 0 ${batchSizes[0]}; only a pass's last batch may be smaller (batch the whole pass once: ` +
        'a.concatenate(b).batch(size), not a.batch(size).concatenate(b.batch(size)))',
    );
  }

  /** Every input value finite, else BAD_DATA naming the batch, the sample and the element. */
  private refuseNonFinite(samples: ArrayLike<number>, index: number, count: number): void {
    const k = samples instanceof Float32Array ? firstNonFinite(samples) : -1; // integers and booleans are finite
    if (k < 0) return;
    const per = samples.length / count;
    throw new TandemError(
      'BAD_DATA',
      `${this.reading.who}: batch ${index}'s xs has ${samples[k]} at sample ${Math.floor(k / per)}, element ` +
        `${k % per}; clean or impute the data before training (a non-finite input makes the loss and the ` +
        'weights NaN)',
    );
  }

  /** Batch `seq` has `count` samples where the epoch's batches say `expected`. */
  private otherSize(seq: number, perEpoch: number, count: number, expected: number): TandemError {
    const where = `${this.reading.who}: batch ${seq % perEpoch} of epoch ${Math.floor(seq / perEpoch) + 1}`;
    return new TandemError(
      'BAD_DATA',
      this.batchesPerEpoch === undefined
        ? `${where} has ${count} samples, and ${expected} in the first pass; every pass must give the same batches`
        : `${where} (batch ${seq} of the dataset) has ${count} samples and batch 0 ${expected}; with ` +
            'batchesPerEpoch every batch is a full one (a smaller one is the end of a pass of the data: repeat ' +
            'before batching, data.repeat().batch(size), not data.batch(size).repeat())',
    );
  }

  /** Without batchesPerEpoch, a pass must end where the first one ended. */
  private async endOfPass(perEpoch: number, epoch: number): Promise<void> {
    if (!(await this.iterator!.next()).done)
      throw new TandemError(
        'BAD_DATA',
        `${this.reading.who}: epoch ${epoch}'s pass of the dataset gave more than the first pass's ${perEpoch} ` +
          `batches; ` +
          'every pass must give the same batches (or give batchesPerEpoch)',
      );
  }

  private ranOut(seq: number, perEpoch: number, total: number): TandemError {
    const epoch = Math.floor(seq / perEpoch) + 1;
    return new TandemError(
      'BAD_DATA',
      this.batchesPerEpoch === undefined
        ? `${this.reading.who}: epoch ${epoch}'s pass of the dataset ended after ${seq % perEpoch} batches, and the ` +
            `first ` +
            `pass gave ${perEpoch}; every pass must give the same batches`
        : `${this.reading.who}: the dataset ran out after ${seq} batches, and batchesPerEpoch ${perEpoch} × the ` +
            `epochs ` +
            `need ${total}; give a dataset of at least that many batches (dataset.repeat())`,
    );
  }
}

function shapeWords(targetShape: number[] | undefined): string {
  return targetShape ? `targets of shape [${targetShape.join(', ')}]` : 'one label per sample';
}
