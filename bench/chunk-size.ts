/**
 * `npm run bench -- chunk-size`: what cutting a group's all-reduce into chunks costs on the shared-memory transport
 * (the priority exchange's `chunkFloats`), 2 devices, a 16 MiB group (the run's registered gradient buffer): ms per
 * group for chunk sizes 16 Ki..4 Mi floats and the whole group, without and with the per-chunk readiness agreement.
 * Table on stdout, JSON in bench/results/chunk-size.json.
 */
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SHARED_MEMORY_TRANSPORT } from '../src/collectives/shared-memory-transport.js';

export interface ChunkSizeOptions {
  runs: number;
  out: string;
}

async function groupMs(
  devices: number,
  length: number,
  chunkFloats: number,
  agree: boolean,
  repeats: number,
): Promise<number> {
  const data = new SharedArrayBuffer(devices * length * 4);
  new Float32Array(data).fill(1);
  const { handles } = SHARED_MEMORY_TRANSPORT.prepare({
    name: 'bench',
    size: devices,
    registered: [{ buffer: data, slotFloats: length, slots: devices }],
    stagingFloats: 1 << 16,
    options: { allReduce: 'sharded' },
  });
  const workers = Array.from(
    { length: devices },
    (_, rank) =>
      new Worker(new URL('./chunked-allreduce-rank.js', import.meta.url), {
        workerData: { handle: handles[rank], data, length, chunkFloats, agree, repeats },
      }),
  );
  const times = await Promise.all(workers.map(async w => (await once(w, 'message'))[0] as number));
  await Promise.all(workers.map(w => w.terminate()));
  return Math.max(...times);
}

export async function runChunkSizeBench(opts: ChunkSizeOptions): Promise<void> {
  const devices = 2,
    length = 4 << 20; // 16 MiB
  console.log(
    `chunk-size bench: shared-memory all-reduce (sharded) of a ${(length * 4) / 2 ** 20} MiB group, ${devices} ` +
      `devices, ${opts.runs} repeats; ${os.cpus().length} cores`,
  );
  const rows: { chunkFloats: number; chunkMiB: number; ms: number; msWithAgreement: number }[] = [];
  for (const chunkFloats of [16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20]) {
    const ms = await groupMs(devices, length, chunkFloats, false, opts.runs);
    const msWithAgreement = await groupMs(devices, length, chunkFloats, true, opts.runs);
    rows.push({ chunkFloats, chunkMiB: (chunkFloats * 4) / 2 ** 20, ms, msWithAgreement });
  }
  console.log(
    '\n| chunk (floats) | chunk (MiB) | ms per group | ms per group, agreement after each chunk | vs whole group ' +
      '|\n|---:|---:|---:|---:|---:|',
  );
  const whole = rows[rows.length - 1].ms;
  for (const r of rows)
    console.log(
      `| ${r.chunkFloats} | ${r.chunkMiB} | ${r.ms.toFixed(2)} | ${r.msWithAgreement.toFixed(2)} | ` +
        `${(r.msWithAgreement / whole).toFixed(2)} |`,
    );
  mkdirSync(opts.out, { recursive: true });
  const file = path.join(opts.out, 'chunk-size.json');
  writeFileSync(file, JSON.stringify({ devices, groupFloats: length, cores: os.cpus().length, rows }, null, 2));
  console.log(`\n${file}`);
}
