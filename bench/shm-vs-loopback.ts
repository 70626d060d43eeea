/**
 * `npm run bench -- shm-vs-loopback [--runs N]`: all-reduce (sum, float32) between 2 processes of this machine, on
 * the shm transport (one POSIX shared-memory segment, futex barriers) against the gloo transport over TCP loopback
 * (what processes of one machine used before), 64 KiB … 16 MiB. Both run in the same two processes, alternating
 * every repeat, so the ratio is measured under the same load; the machine is shared, so the ratio is the figure to
 * read, not the milliseconds. The shm transport's default staging piece (4 MiB per rank for 2 ranks) is measured
 * with smaller pieces too (256 KiB, 1 MiB: in the JSON, and a column of ratios). Table on stdout, JSON in
 * bench/results/shm-vs-loopback.json.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStoreServer } from '../src/collectives/gloo/tcp-store-server.js';
import type { ShmBenchJob, ShmBenchTimes } from './shm-vs-loopback-rank.js';
import { shmChunkFloats } from '../src/collectives/process-shm-transport.js';

export interface ShmVsLoopbackOptions {
  runs?: number;
  out: string;
}

const SIZES = [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20];
/** Staging pieces (floats per rank) measured besides the default. */
const OTHER_PIECES = [1 << 16, 1 << 18];
const RANK = fileURLToPath(new URL('./shm-vs-loopback-rank.js', import.meta.url));

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function runRanks(size: number, repeats: number[], pieces: number[]): Promise<ShmBenchTimes[]> {
  const server = await startStoreServer({ host: '127.0.0.1' });
  try {
    const ranks = Array.from({ length: size }, (_, rank) => {
      const job: ShmBenchJob = { rank, size, store: server.url, sizes: SIZES, repeats, pieces };
      const child = spawn(process.execPath, [RANK, JSON.stringify(job)], { stdio: ['ignore', 'pipe', 'inherit'] });
      const lines: string[] = [];
      createInterface({ input: child.stdout! }).on('line', l => lines.push(l));
      return new Promise<string[]>((resolve, reject) =>
        child.on('exit', code =>
          code === 0 ? resolve(lines) : reject(new Error(`bench rank ${rank} exited ${code}`)),
        ),
      );
    });
    const [zero] = await Promise.all(ranks);
    return JSON.parse(zero[0]) as ShmBenchTimes[];
  } finally {
    await server.close();
  }
}

export async function runShmVsLoopbackBench(opts: ShmVsLoopbackOptions): Promise<void> {
  const processes = 2;
  const repeats = SIZES.map(b => opts.runs ?? Math.max(10, Math.min(200, Math.round((64 << 20) / b))));
  console.log(
    `shm-vs-loopback bench: all-reduce (sum) between ${processes} processes, shm (staging pieces of ` +
      `${(shmChunkFloats(processes) * 4) / 2 ** 20} MiB per rank) ` +
      'vs gloo over 127.0.0.1, alternating; ' +
      `${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(1)}`,
  );
  const pieces = [shmChunkFloats(processes), ...OTHER_PIECES];
  const times = await runRanks(processes, repeats, pieces);
  const kib = (b: number) => (b >= 1 << 20 ? `${b / 2 ** 20} MiB` : `${b / 1024} KiB`);
  const rows = times.map(t => {
    const shm = median(t.shm[0]),
      gloo = median(t.gloo);
    return {
      bytes: t.bytes,
      repeats: t.gloo.length,
      shmMs: shm,
      glooMs: gloo,
      glooOverShm: gloo / shm,
      shmGBs: t.bytes / shm / 1e6,
      glooGBs: t.bytes / gloo / 1e6,
      shmMinMs: Math.min(...t.shm[0]),
      glooMinMs: Math.min(...t.gloo),
      otherPieces: OTHER_PIECES.map((floats, k) => ({
        pieceBytes: floats * 4,
        shmMs: median(t.shm[k + 1]),
        glooOverShm: gloo / median(t.shm[k + 1]),
      })),
    };
  });
  console.log(
    '\n| buffer | repeats | shm ms (median) | gloo loopback ms (median) | gloo / shm | shm GB/s | gloo GB/s | ' +
      `${OTHER_PIECES.map(p => `gloo / shm, ${kib(p * 4)} pieces`).join(
        ' | ',
      )} |\n|---:|---:|---:|---:|---:|---:|---:|${OTHER_PIECES.map(() => '---:|').join('')}`,
  );
  for (const r of rows) {
    console.log(
      `| ${kib(r.bytes)} | ${r.repeats} | ${r.shmMs.toFixed(3)} | ${r.glooMs.toFixed(3)} | ` +
        `${r.glooOverShm.toFixed(1)}× | ${r.shmGBs.toFixed(2)} | ` +
        `${r.glooGBs.toFixed(2)} | ${r.otherPieces.map(o => `${o.glooOverShm.toFixed(1)}×`).join(' | ')} |`,
    );
  }
  mkdirSync(opts.out, { recursive: true });
  const file = path.join(opts.out, 'shm-vs-loopback.json');
  writeFileSync(
    file,
    JSON.stringify(
      {
        processes,
        cores: os.cpus().length,
        loadavg: os.loadavg(),
        date: new Date().toISOString(),
        defaultPieceBytes: pieces[0] * 4,
        rows,
      },
      null,
      2,
    ),
  );
  console.log(`\n${file}`);
}
