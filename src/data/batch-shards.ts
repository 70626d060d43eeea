/** Samples split over devices (or hosts) in contiguous runs of whole batches, as evaluate and validation split them. */

/** [first sample, samples] of each device: contiguous runs of whole batches (none empty). */
export function shardsOf(n: number, batchSize: number, devices: number): [number, number][] {
  const batches = Math.ceil(n / batchSize);
  const shards: [number, number][] = [];
  for (let d = 0; d < Math.min(devices, batches); d++) {
    const from = Math.floor((d * batches) / Math.min(devices, batches)) * batchSize;
    const to = Math.min(n, Math.floor(((d + 1) * batches) / Math.min(devices, batches)) * batchSize);
    shards.push([from, to - from]);
  }
  return shards;
}
