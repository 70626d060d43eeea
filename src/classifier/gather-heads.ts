/**
 * Every global rank's final head, on every rank, through one all-gather over
 * the compute communicator: how the heads of other hosts reach host 0 (which
 * assembles and writes the full classifier). Each rank sends one record of
 * the same size: [label count, labels, W (E × its labels), b], padded to the
 * largest share. Labels travel as float32: exact below 2^24 classes.
 */
import type { BlockingCollective } from '../collectives/collective.js';
import type { HeadValues } from '../actors/protocol.js';

export interface HeadShape {
  embedding: number;
  maxLabels: number;
  bias: boolean;
}

function recordFloats(s: HeadShape): number {
  return 1 + s.maxLabels * (1 + s.embedding + (s.bias ? 1 : 0));
}

export function packHead(head: HeadValues, s: HeadShape): Float32Array {
  const rec = new Float32Array(recordFloats(s));
  const n = head.labels.length;
  rec[0] = n;
  rec.set(head.labels, 1);
  rec.set(head.w, 1 + s.maxLabels);
  if (s.bias && head.b) rec.set(head.b, 1 + s.maxLabels * (1 + s.embedding));
  return rec;
}

export function unpackHead(rec: Float32Array, s: HeadShape): HeadValues {
  const n = rec[0];
  const labels = Int32Array.from(rec.subarray(1, 1 + n));
  const w = rec.slice(1 + s.maxLabels, 1 + s.maxLabels + s.embedding * n);
  const bStart = 1 + s.maxLabels * (1 + s.embedding);
  return { labels, w, b: s.bias ? rec.slice(bStart, bStart + n) : undefined };
}

/** Collective: every rank calls it with its own head; returns the heads of all `world` ranks, in rank order. */
export function gatherHeads(
  collective: BlockingCollective,
  head: HeadValues,
  world: number,
  s: HeadShape,
): HeadValues[] {
  const size = recordFloats(s);
  const all = new Float32Array(size * world);
  collective.allGather(packHead(head, s), all);
  return Array.from({ length: world }, (_, r) => unpackHead(all.subarray(r * size, (r + 1) * size), s));
}
