/**
 * `npm run bench -- hosts-line-rate`: how close tandem's gloo all-reduce comes to the link's line rate between 2
 * hosts (network namespaces joined by a veth shaped with tc tbf, bench/network-namespaces.ts). For each rate and
 * buffer size: plain TCP (S bytes each way at once, and S bytes one way), the all-reduce's algorithms (`shards`:
 * all-to-all + all-gather; `pipelined`: chunked, both directions busy), Gloo's own ring (what PyTorch DDP runs),
 * and the line rate (S bytes at the shaped rate). Each run is one pair of processes timing `repeats` all-reduces
 * (the median of the slower host's); the methods take turns run by run, and the median of the runs is reported
 * with their spread (the machine is shared: other processes' load shows as noise). Loopback: both processes here
 * on 127.0.0.1, no namespace.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { makeHostPair, namespaceSupport, type HostPair, type LinkRate } from './network-namespaces.js';
import { jsonLines, killRunningJobs, runHere, runOnHosts } from './hosts-job.js';
import type { LineRateArgs, LineRateMethod, LineRateResult } from './hosts-line-rate-host.js';

const HOST = fileURLToPath(new URL('./hosts-line-rate-host.js', import.meta.url));

/**
 * A shaped link between the namespaces, or `loopback`: both processes here, on 127.0.0.1 (no namespace, no shaping).
 */
export type LineRateLink = LinkRate | 'loopback';

export interface HostsLineRateOptions {
  rates: LineRateLink[];
  megabytes: number[];
  methods: LineRateMethod[];
  /** Timed repeats per process run (after one untimed). */
  repeats: number;
  /** Process runs per method (their medians' median is reported). */
  runs: number;
  chunkFloats?: number;
  out: string;
}

export const DEFAULT_LINE_RATE_METHODS: LineRateMethod[] = [
  'tcp',
  'tcp-oneway',
  'gloo-shards',
  'gloo-pipelined',
  'gloo-ring',
];

interface Row {
  rate: LineRateLink;
  megabytes: number;
  method: LineRateMethod;
  runsMs: number[];
  medianMs: number;
  minMs: number;
  maxMs: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

let port = 29700;

/** One process per host running `method`; the median over repeats of the slower host's ms. */
async function once(
  net: HostPair | undefined,
  method: LineRateMethod,
  bytes: number,
  opts: HostsLineRateOptions,
): Promise<number> {
  const p = port++;
  const addresses = net ? [...net.addresses] : ['127.0.0.1', '127.0.0.1'];
  const command = (rank: 0 | 1) => ({
    command: process.execPath,
    args: [
      HOST,
      JSON.stringify({
        method,
        rank,
        size: 2,
        addresses,
        port: p,
        bytes,
        repeats: opts.repeats,
        ...(opts.chunkFloats ? { chunkFloats: opts.chunkFloats } : {}),
      } satisfies LineRateArgs),
    ],
  });
  const label = `line rate ${method}`;
  const outs = net
    ? (await runOnHosts(net, [command(0), command(1)], 600_000, label)).outs
    : await Promise.all([runHere(command(0), 600_000, label), runHere(command(1), 600_000, label)]);
  const results = outs.map(o => jsonLines(o)[0] as unknown as LineRateResult);
  const perRepeat = results[0].ms.map((_, i) => Math.max(...results.map(r => r.ms[i])));
  return median(perRepeat);
}

function lineRateMs(rate: LineRateLink, bytes: number): number {
  const m = /^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$/.exec(rate);
  if (!m) return NaN;
  return ((bytes * 8) / (Number(m[1]) * { kbit: 1e3, mbit: 1e6, gbit: 1e9 }[m[2] as 'kbit' | 'mbit' | 'gbit'])) * 1000;
}

export async function runHostsLineRateBench(opts: HostsLineRateOptions): Promise<void> {
  const support = namespaceSupport();
  if (!support.ok) throw new Error(`hosts-line-rate: ${support.reason}`);
  const rows: Row[] = [];
  const net = makeHostPair();
  const cleanup = (): void => {
    killRunningJobs();
    net.close();
  };
  process.once('SIGINT', () => {
    cleanup();
    process.exit(130);
  });
  try {
    for (const rate of opts.rates) {
      if (rate !== 'loopback') net.shape(rate);
      for (const megabytes of opts.megabytes) {
        const bytes = Math.round((megabytes * 1e6) / 4) * 4;
        // the methods take turns run by run, so that the machine's load drifting over time falls on all of them
        const runsMs = opts.methods.map((): number[] => []);
        for (let r = 0; r < opts.runs; r++) {
          for (const [m, method] of opts.methods.entries())
            runsMs[m].push(await once(rate === 'loopback' ? undefined : net, method, bytes, opts));
        }
        for (const [m, method] of opts.methods.entries()) {
          const ms = runsMs[m];
          rows.push({
            rate,
            megabytes,
            method,
            runsMs: ms,
            medianMs: median(ms),
            minMs: Math.min(...ms),
            maxMs: Math.max(...ms),
          });
          console.error(`${rate} ${megabytes} MB ${method}: ${ms.map(x => x.toFixed(1)).join(' ')} ms`);
        }
      }
    }
  } finally {
    cleanup();
  }
  print(rows, opts);
}

function print(rows: Row[], opts: HostsLineRateOptions): void {
  console.log(
    `2 hosts (network namespaces, veth shaped by tc tbf): S bytes each way; medians of ${opts.runs} runs × ` +
      `${opts.repeats} repeats`,
  );
  console.log(
    '| link | MB | method | median ms | min–max ms | line rate ms | line rate / median | plain TCP / median ' +
      '|\n|---|---|---|---|---|---|---|---|',
  );
  for (const r of rows) {
    const line = lineRateMs(r.rate, r.megabytes * 1e6);
    const tcp = rows.find(t => t.rate === r.rate && t.megabytes === r.megabytes && t.method === 'tcp');
    console.log(
      `| ${r.rate} | ${r.megabytes} | ${r.method} | ${r.medianMs.toFixed(1)} | ` +
        `${r.minMs.toFixed(1)}–${r.maxMs.toFixed(1)} | ` +
        (`${Number.isNaN(line) ? '–' : line.toFixed(1)} | ` +
          `${Number.isNaN(line) ? '–' : (line / r.medianMs).toFixed(2)} | ` +
          `${tcp ? (tcp.medianMs / r.medianMs).toFixed(2) : '–'} |`),
    );
  }
  mkdirSync(opts.out, { recursive: true });
  writeFileSync(
    `${opts.out}/hosts-line-rate.json`,
    JSON.stringify(
      {
        bench: 'hosts-line-rate',
        date: new Date().toISOString(),
        options: opts,
        rows: rows.map(r => ({ ...r, lineRateMs: lineRateMs(r.rate, r.megabytes * 1e6) })),
      },
      null,
      2,
    ),
  );
}
