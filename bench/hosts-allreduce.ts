/**
 * `npm run bench -- hosts-allreduce`: one all-reduce (mean) of a registered gradient-like buffer across H host
 * processes × L devices on 127.0.0.1, flat `gloo` (every device one Gloo rank) against `hierarchical`
 * (shared memory inside a host, the Gloo chain across hosts). Loopback only: it measures the transports'
 * overheads (copies, ticks, local TCP between a host's own devices), not a real network.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startStoreServer } from '../src/collectives/gloo/tcp-store-server.js';

const HOST = fileURLToPath(new URL('./hosts-allreduce-host.js', import.meta.url));

export interface HostsAllReduceOptions {
  hosts: number;
  local: number;
  megabytes: number[];
  repeats: number;
  out: string;
}

/** Milliseconds per all-reduce (the slowest device of every host) of `floats` floats on `transport`. */
async function measure(
  transport: string,
  hosts: number,
  local: number,
  floats: number,
  repeats: number,
): Promise<number> {
  const server = await startStoreServer({ host: '127.0.0.1' });
  try {
    const key = `bench.${transport}.${floats}.${Date.now()}`;
    const outs = await Promise.all(
      Array.from(
        { length: hosts },
        (_, host) =>
          new Promise<string>((resolve, reject) => {
            const child = spawn(
              process.execPath,
              [HOST, JSON.stringify({ transport, host, hosts, local, store: server.url, key, floats, repeats })],
              { stdio: ['ignore', 'pipe', 'inherit'] },
            );
            let out = '';
            child.stdout.on('data', (d: Buffer) => {
              out += d.toString();
            });
            child.on('exit', code =>
              code === 0 ? resolve(out) : reject(new Error(`host ${host} (${transport}) exited ${code}`)),
            );
          }),
      ),
    );
    return Math.max(...outs.map(o => (JSON.parse(o.trim()) as { msPerAllReduce: number }).msPerAllReduce));
  } finally {
    await server.close();
  }
}

export async function runHostsAllReduceBench(opts: HostsAllReduceOptions): Promise<void> {
  const rows: { megabytes: number; transport: string; msPerAllReduce: number; busGBps: number }[] = [];
  const world = opts.hosts * opts.local;
  for (const megabytes of opts.megabytes) {
    const floats = Math.round((megabytes * (1 << 20)) / 4);
    for (const transport of ['gloo', 'hierarchical']) {
      const ms = await measure(transport, opts.hosts, opts.local, floats, opts.repeats);
      // "bus bandwidth" as NCCL's tests count it: 2 (N-1)/N of the buffer per rank, per second.
      rows.push({
        megabytes,
        transport,
        msPerAllReduce: ms,
        busGBps: (((2 * (world - 1)) / world) * floats * 4) / (ms / 1000) / 1e9,
      });
    }
  }
  console.log(
    `all-reduce mean across ${opts.hosts} host processes × ${opts.local} devices on 127.0.0.1 (${opts.repeats} ` +
      `repeats)`,
  );
  console.log('| MB | transport | ms / all-reduce | bus GB/s |\n|---|---|---|---|');
  for (const r of rows)
    console.log(`| ${r.megabytes} | ${r.transport} | ${r.msPerAllReduce.toFixed(2)} | ${r.busGBps.toFixed(2)} |`);
  mkdirSync(opts.out, { recursive: true });
  writeFileSync(
    `${opts.out}/hosts-allreduce.json`,
    JSON.stringify(
      {
        bench: 'hosts-allreduce',
        date: new Date().toISOString(),
        options: opts,
        note: 'loopback: both transports on one machine; a real network changes the picture',
        rows,
      },
      null,
      2,
    ),
  );
}
