/**
 * Where things lie in the shm transport's segment: a header of Int32 words
 * (the barrier's count and generation, the failed-rank word, one pid per
 * process, one arrival count per rank), then, page-aligned, two staging areas
 * of one slot of `chunkFloats` floats per rank. Consecutive rounds of the
 * collectives alternate between the areas, so a rank may fill its slot for
 * round k+1 while a slow peer still reads round k's.
 */
export const MAGIC = 0x74_73_68_6d; // 'tshm'
export const W_MAGIC = 0;
export const W_RANKS = 1;
export const W_COUNT = 2;
export const W_GENERATION = 3;
/** 0, or 1 + the rank of a rank whose operation failed (its peers fail at once instead of waiting out the timeout). */
export const W_FAILED = 4;
const HEADER_WORDS = 16;
const PAGE = 4096;

export interface SegmentLayout {
  /** Ranks in the communicator (every process's). */
  ranks: number;
  processes: number;
  /** Rank r lives in process floor(r / ranksPerProcess). */
  ranksPerProcess: number;
  /** Floats per rank per staging area: the largest piece one round moves. */
  chunkFloats: number;
  /** Word of process p's pid: pidWord + p. */
  pidWord: number;
  /** Word of rank r's count of barriers entered: arrivedWord + r. */
  arrivedWord: number;
  /** Byte offset of the staging areas. */
  dataByte: number;
  bytes: number;
}

export function segmentLayout(ranks: number, processes: number, chunkFloats: number): SegmentLayout {
  const pidWord = HEADER_WORDS,
    arrivedWord = pidWord + processes;
  const dataByte = Math.ceil(((arrivedWord + ranks) * 4) / PAGE) * PAGE;
  return {
    ranks,
    processes,
    ranksPerProcess: ranks / processes,
    chunkFloats,
    pidWord,
    arrivedWord,
    dataByte,
    bytes: dataByte + 2 * ranks * chunkFloats * 4,
  };
}

/** Rank r's slot of staging area `area` (0 or 1), for every r. */
export function areaSlots(segment: SharedArrayBuffer, layout: SegmentLayout, area: number): Float32Array[] {
  const slotBytes = layout.chunkFloats * 4;
  const base = layout.dataByte + area * layout.ranks * slotBytes;
  return Array.from(
    { length: layout.ranks },
    (_, r) => new Float32Array(segment, base + r * slotBytes, layout.chunkFloats),
  );
}
