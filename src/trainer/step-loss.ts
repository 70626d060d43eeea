/**
 * A step's loss from its devices' losses (each the mean over its own samples) and their samples: the plain mean where
 * every device trained a full share (`perDevice`), as one process with every device sums them; else weighted by each
 * device's samples (an uneven split, an epoch's last batch: a device without samples reports 0 and weighs nothing).
 * The step loop (this host's devices) and host 0's world view (every host's) take it alike, so the two agree bit for
 * bit.
 */
export function stepLoss(losses: readonly number[], counts: readonly number[], perDevice: number): number {
  if (counts.every(n => n === perDevice)) return losses.reduce((s, l) => s + l, 0) / losses.length;
  const samples = counts.reduce((s, n) => s + n, 0);
  return losses.reduce((s, l, i) => s + l * counts[i], 0) / samples;
}
