/**
 * All-reduce (mean) and broadcast through SharedArrayBuffers on one host, in
 * the two forms of the design:
 *
 * - `primary`: the seed's scheme — rank 0 sums every slot and divides, then
 *   every rank copies rank 0's result.
 * - `sharded`: reduce-scatter + all-gather — rank r reduces its own 1/N slice
 *   of the range from all slots, then every rank gathers the other slices.
 *
 * Both sum each element over the slots in rank order 0..N-1, in float32, so
 * both forms give bit-identical results and all replicas stay identical.
 */
import type { ControlBlock } from '../actors/control-block.js';
import type { AllReduceKind, Collective, SlotSet } from './collective.js';
import type { FlatArithmetic } from '../optim/flat-arithmetic.js';

/** Slice [start, end) of rank `rank` when [from, to) is split in `size` near-equal shards. */
export function shardOf(from: number, to: number, rank: number, size: number): [number, number] {
  const n = to - from;
  const base = Math.floor(n / size), extra = n % size;
  const start = from + rank * base + Math.min(rank, extra);
  return [start, start + base + (rank < extra ? 1 : 0)];
}

const BLOCK = 4096;
const scratch = new Float32Array(BLOCK);

/**
 * Mean over all slots of [start, end), written into `out` (which may be one of
 * the slots). Block by block, slot by slot (tight typed-array loops); each
 * element is summed in rank order, rounded to float32 at every addition (a
 * Float32Array store rounds), then divided: the same bits on every rank.
 */
export function reduceMeanInto(slots: SlotSet, out: Float32Array, start: number, end: number): void {
  const n = slots.length;
  if (n === 1) { if (out !== slots[0]) out.set(slots[0].subarray(start, end), start); return; }
  for (let b = start; b < end; b += BLOCK) {
    const len = Math.min(BLOCK, end - b);
    scratch.set(slots[0].subarray(b, b + len));
    for (let r = 1; r < n; r++) {
      const src = slots[r];
      for (let i = 0; i < len; i++) scratch[i] += src[b + i];
    }
    for (let i = 0; i < len; i++) out[b + i] = scratch[i] / n;
  }
}

export class SharedMemoryCollective implements Collective {
  constructor(
    readonly kind: AllReduceKind,
    readonly rank: number,
    readonly size: number,
    private readonly control: ControlBlock,
    /** Who computes the mean: the JS loop below, or the native addon's (the same bits). */
    private readonly arithmetic: Pick<FlatArithmetic, 'reduceMeanInto'> = { reduceMeanInto },
  ) {}

  async allReduceMean(slots: SlotSet, start: number, end: number): Promise<void> {
    if (this.size === 1 || end <= start) return;
    const mine = slots[this.rank];
    switch (this.kind) {
      case 'primary':
        this.control.barrier('peers to hand over their gradients (primary reduce)');
        if (this.rank === 0) this.arithmetic.reduceMeanInto(slots, mine, start, end);
        this.control.barrier('the primary device to reduce');
        if (this.rank !== 0) mine.set(slots[0].subarray(start, end), start);
        break;
      case 'sharded': {
        this.control.barrier('peers to hand over their gradients (reduce-scatter)');
        const [s, e] = shardOf(start, end, this.rank, this.size);
        this.arithmetic.reduceMeanInto(slots, mine, s, e);
        this.control.barrier('peers to reduce their shards');
        for (let r = 0; r < this.size; r++) {
          if (r === this.rank) continue;
          const [rs, re] = shardOf(start, end, r, this.size);
          mine.set(slots[r].subarray(rs, re), rs);
        }
        break;
      }
      default: { const never: never = this.kind; throw new Error(`unknown all-reduce ${String(never)}`); }
    }
    // Nobody may overwrite its slot (next step's gradients) while a peer still reads it.
    this.control.barrier('peers to finish gathering');
  }

  async broadcast(slots: SlotSet, root: number, start: number, end: number): Promise<void> {
    if (this.size === 1 || end <= start) return;
    this.control.barrier('the root to publish the broadcast values');
    if (this.rank !== root) slots[this.rank].set(slots[root].subarray(start, end), start);
    this.control.barrier('peers to finish the broadcast copy');
  }
}
