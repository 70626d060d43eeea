/**
 * The reference arithmetic of a reduction over the slots of one buffer (rank
 * r's copy in slot r): element by element, in slot order 0..N-1, rounded to
 * float32 at every addition (a Float32Array store rounds), then divided for a
 * mean. Every transport reduces with these loops (or the native addon's, the
 * same bits), so every rank and every transport gets the same bits.
 */
import type { ReduceOp, SlotSet } from './collective.js';

const BLOCK = 4096;
const scratch = new Float32Array(BLOCK);

/** out[start, end) = op over the slots' [start, end); out may be one of the slots. Block by block, slot by slot. */
export function reduceSlotsInto(slots: SlotSet, out: Float32Array, start: number, end: number, op: ReduceOp): void {
  const n = slots.length;
  if (n === 1) {
    if (out !== slots[0]) out.set(slots[0].subarray(start, end), start);
    return;
  }
  for (let b = start; b < end; b += BLOCK) {
    const len = Math.min(BLOCK, end - b);
    scratch.set(slots[0].subarray(b, b + len));
    for (let r = 1; r < n; r++) {
      const src = slots[r];
      if (op === 'max') for (let i = 0; i < len; i++) scratch[i] = Math.max(scratch[i], src[b + i]);
      else for (let i = 0; i < len; i++) scratch[i] += src[b + i];
    }
    if (op === 'mean') for (let i = 0; i < len; i++) out[b + i] = scratch[i] / n;
    else out.set(scratch.subarray(0, len), b);
  }
}

/** The mean over all slots of [start, end), written into `out` (the `SlotReducer` of the JS loops). */
export function reduceMeanInto(slots: SlotSet, out: Float32Array, start: number, end: number): void {
  reduceSlotsInto(slots, out, start, end, 'mean');
}

/** Slice [start, end) of rank `rank` when [from, to) is split in `size` near-equal shards. */
export function shardOf(from: number, to: number, rank: number, size: number): [number, number] {
  const n = to - from;
  const base = Math.floor(n / size),
    extra = n % size;
  const start = from + rank * base + Math.min(rank, extra);
  return [start, start + base + (rank < extra ? 1 : 0)];
}
