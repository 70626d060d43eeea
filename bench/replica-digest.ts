/**
 * `node dist/bench/replica-digest.js`: what the replica check (`replicaCheckEvery`) costs the main
 * thread per check and device: the digest (replica-checksum.ts) of 1, 4 and 16 MiB of parameters,
 * median and minimum of 15 runs after a warm-up. Prints a table; JSON in bench/results/replica-digest.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { replicaChecksum } from '../src/trainer/replica-checksum.js';

const rows: { mib: number; medianMs: number; minMs: number; gibPerS: number }[] = [];
console.log('| parameters | MiB | median ms | min ms | GiB/s (median) |\n|---:|---:|---:|---:|---:|');
for (const mib of [1, 4, 16]) {
  const values = new Float32Array((mib << 20) / 4).map((_, i) => Math.sin(i));
  replicaChecksum(values);
  const times: number[] = [];
  for (let r = 0; r < 15; r++) {
    const t0 = performance.now();
    replicaChecksum(values);
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const row = { mib, medianMs: times[7], minMs: times[0], gibPerS: mib / 1024 / (times[7] / 1000) };
  rows.push(row);
  console.log(
    `| ${values.length} | ${mib} | ${row.medianMs.toFixed(2)} | ${row.minMs.toFixed(2)} | ${row.gibPerS.toFixed(2)} |`,
  );
}
mkdirSync('bench/results', { recursive: true });
writeFileSync(
  'bench/results/replica-digest.json',
  JSON.stringify({ rows, cpus: os.cpus().length, load1: os.loadavg()[0], node: process.version }, null, 2),
);
