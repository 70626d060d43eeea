/**
 * Priority exchange (ByteScheduler's idea, credit = one chunk): the order in
 * which a comm thread exchanges one step's groups when `exchangeOrder` is
 * `priority`.
 *
 * Each group's all-reduce is cut into chunks of at most `chunkFloats` floats
 * (a group smaller than a chunk is one chunk; the last chunk holds the rest).
 * Between two chunks the comm thread may switch to a group of higher
 * priority; a group is applied once all its chunks are reduced. Priority is
 * the order forward needs the groups: groups are numbered in transmission
 * (backward) order, so the last group holds the first layers and has the
 * highest priority — the small conv group, ready last but needed first,
 * overtakes the large FC group in flight instead of queueing behind it.
 *
 * Agreement. Collectives pair up across ranks, so every rank must take the
 * same chunk of the same group at the same point, yet each rank sees only its
 * own gradients become ready, at its own times. The schedule therefore
 * decides only from information every rank holds identically:
 *
 * - `agreed`: the number of leading groups (transmission order) ready on
 *   EVERY rank, learned by `agree` — a collective in which each rank offers
 *   how many leading groups are ready locally and gets the minimum over ranks.
 *   Every rank calls it at the same points of the schedule (after each chunk
 *   while some group is not yet agreed, and after each local wait), so the
 *   collectives match, and every rank gets the same answer.
 * - the chunks already exchanged (the same on every rank, by induction).
 *
 * The next chunk is the next one of the highest-priority agreed, unfinished
 * group. When no agreed group is left, every rank waits locally for group
 * `agreed` (the next to become ready in backward order; every rank picks the
 * same one) and then agrees again: each rank's offer is then at least
 * `agreed + 1`, so the schedule always advances. A local wait blocks only for
 * this rank's own compute thread, which needs nothing from the comm side of
 * this step to produce the gradients: no deadlock. The last group needs no
 * agreement (waiting for it is the only choice left). With one group this is
 * the plain exchange, without a single extra collective.
 *
 * Bits: a chunk is an all-reduce of a sub-range; every transport adds each
 * element over the ranks in rank order (collective.ts), so the sums — and the
 * parameters — are those of one all-reduce per group, whatever the chunking
 * and the order.
 */
import type { ParameterGroup } from '../model/parameter-layout.js';

/** A range of one group's all-reduce. */
export interface ExchangeChunk {
  /** 0-based, of `count`. */
  index: number;
  count: number;
  start: number;
  end: number;
}

/** How a comm thread exchanges a step's groups. */
export type ExchangeOrder = { order: 'ready' } | { order: 'priority'; chunkFloats: number };

export const EXCHANGE_ORDERS = ['ready', 'priority'] as const;

/** Default chunk: 1 Mi floats (4 MiB). */
export const DEFAULT_CHUNK_FLOATS = 1 << 20;

/** `group` cut into chunks of at most `chunkFloats` floats, in order. */
export function chunksOf(group: ParameterGroup, chunkFloats: number): ExchangeChunk[] {
  const count = Math.max(1, Math.ceil((group.end - group.start) / chunkFloats));
  return Array.from({ length: count }, (_, index) => ({
    index,
    count,
    start: group.start + index * chunkFloats,
    end: Math.min(group.end, group.start + (index + 1) * chunkFloats),
  }));
}

/** What the schedule asks of its comm thread for one step. */
export interface PriorityStepIo {
  /** Blocks until this rank's gradients of `group` are ready; false: the run is stopping. */
  waitReady(group: number): boolean;
  /** How many leading groups have this rank's gradients ready now (no wait). */
  readyPrefix(): number;
  /** A collective: the minimum of `count` over the ranks. */
  agree(count: number): Promise<number>;
  /** All-reduces one chunk of `group`. */
  exchangeChunk(group: number, chunk: ExchangeChunk): Promise<void>;
  /** Every chunk of `group` is reduced: apply it. */
  finish(group: number): Promise<void>;
}

/** Exchanges one step's groups (`chunks[g]` = group g's chunks) in priority order. False: stopped while waiting. */
export async function runPriorityStep(
  chunks: readonly (readonly ExchangeChunk[])[],
  io: PriorityStepIo,
): Promise<boolean> {
  const n = chunks.length;
  const next = new Array<number>(n).fill(0);
  let agreed = 0,
    finished = 0;
  while (finished < n) {
    let g = agreed - 1;
    while (g >= 0 && next[g] === chunks[g].length) g--;
    if (g < 0) {
      // no agreed group left: wait for the next one in backward order, then see how far every rank is
      if (!io.waitReady(agreed)) return false;
      agreed = agreed === n - 1 ? n : await io.agree(io.readyPrefix());
      continue;
    }
    await io.exchangeChunk(g, chunks[g][next[g]]);
    if (++next[g] === chunks[g].length) {
      await io.finish(g);
      finished++;
    }
    if (agreed < n) agreed = await io.agree(io.readyPrefix());
  }
  return true;
}
