/**
 * A streamed dataset's source for a run: a `BatchRing` published to the threads started from now on, and a data
 * module (in `dir`) whose factory opens that ring, to give the run as its `data`. `close()` closes the ring (every
 * wait on it returns) and withdraws it.
 */
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { allocateBatchRing, BatchRing, type BatchRingSpec } from './batch-ring.js';
import { publishRing, type RingDatasetMeta } from './ring-dataset.js';

export interface RingSource {
  ring: BatchRing;
  /** The data module's path. */
  dataModule: string;
  close(): void;
}

export async function openRingSource(
  dir: string,
  shape: Omit<BatchRingSpec, 'buffer'>,
  meta: Omit<RingDatasetMeta, 'ring'>,
): Promise<RingSource> {
  const ring = new BatchRing(allocateBatchRing(shape));
  const key = randomUUID();
  const dataModule = path.join(dir, `stream-data-${key}.mjs`);
  const ringModule = new URL('./ring-dataset.js', import.meta.url).href;
  await writeFile(
    dataModule,
    `import { ringDataset } from ${JSON.stringify(ringModule)};\n` +
      `export default () => ringDataset(${JSON.stringify(key)});\n`,
  );
  const withdraw = publishRing(key, { ...meta, ring: ring.spec });
  return {
    ring,
    dataModule,
    close: () => {
      ring.close();
      withdraw();
    },
  };
}
