/**
 * `npm run bench -- hosts-line-rate`: how close tandem's gloo all-reduce comes to the link's line rate between 2
 * hosts (network namespaces joined by a veth shaped with tc tbf, bench/network-namespaces.ts). For each rate and
 * buffer size: plain TCP (S bytes each way at once, and S bytes one way), the all-reduce's algorithms (`shards`:
 * all-to-all + all-gather; `pipelined`: chunked, both directions busy), Gloo's own ring (what PyTorch DDP runs),
 * and the line rate (S bytes at the shaped rate). Each run is one pair of processes timing `repeats` all-reduces
 * (the median of the slower host's); the methods take turns run by run, and the median of the runs is reported
 * with their spread (the machine is shared: other processes' load shows as noise). Loopback: both processes here
 * on 127.0.0.1, no namespace.
 *
 * The job secret (docs/guide/security.md): each gloo method runs `with` and `without` it (TANDEM_JOB_SECRET set or
 * empty in both processes), the two taking turns with the other methods run by run; the table and JSON give both and
 * their ratio, for the all-reduces and for the set-up (connecting through the store, where the secret's handshakes
 * and HMACs are: Gloo's pairs themselves are not authenticated, so the all-reduces should not differ).
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
  /** The gloo methods' runs with the job secret, without it, or both (default both); plain TCP has none. */
  secret?: SecretMode[];
  out: string;
}

export type SecretMode = 'with' | 'without';
/** A method and whether its processes hold a job secret ('none': plain TCP, which has no store). */
type Variant = { method: LineRateMethod; secret: SecretMode | 'none' };

const SECRET = 'hosts-line-rate bench secret, 32 bytes or more';

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
  secret: Variant['secret'];
  runsMs: number[];
  medianMs: number;
  minMs: number;
  maxMs: number;
  /** Gloo: the median over runs of the slower host's set-up ms. */
  setupMedianMs?: number;
  /** A row `with` the secret: its median / the same method's `without` (all-reduce; set-up). */
  withOverWithout?: number;
  setupWithOverWithout?: number;
}

function variantsOf(opts: HostsLineRateOptions): Variant[] {
  const modes = opts.secret ?? ['without', 'with'];
  return opts.methods.flatMap((method): Variant[] =>
    method.startsWith('tcp') ? [{ method, secret: 'none' }] : modes.map(secret => ({ method, secret })),
  );
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

let port = 29700;

/** One process per host running `method`; the median over repeats of the slower host's ms, and its set-up ms. */
async function once(
  net: HostPair | undefined,
  { method, secret }: Variant,
  bytes: number,
  opts: HostsLineRateOptions,
): Promise<{ ms: number; setupMs?: number }> {
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
    env: { TANDEM_JOB_SECRET: secret === 'with' ? SECRET : '' },
  });
  const label = `line rate ${method}`;
  const outs = net
    ? (await runOnHosts(net, [command(0), command(1)], 600_000, label)).outs
    : await Promise.all([runHere(command(0), 600_000, label), runHere(command(1), 600_000, label)]);
  const results = outs.map(o => jsonLines(o)[0] as unknown as LineRateResult);
  const perRepeat = results[0].ms.map((_, i) => Math.max(...results.map(r => r.ms[i])));
  const setups = results.map(r => r.setupMs).filter((x): x is number => x !== undefined);
  return { ms: median(perRepeat), ...(setups.length > 0 ? { setupMs: Math.max(...setups) } : {}) };
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
        rows.push(...(await measure(rate === 'loopback' ? undefined : net, rate, megabytes, opts)));
      }
    }
  } finally {
    cleanup();
  }
  print(rows, opts);
}

/** Every variant at one rate and size, taking turns run by run; one row each. */
async function measure(
  net: HostPair | undefined,
  rate: LineRateLink,
  megabytes: number,
  opts: HostsLineRateOptions,
): Promise<Row[]> {
  const bytes = Math.round((megabytes * 1e6) / 4) * 4;
  const variants = variantsOf(opts);
  // the variants take turns run by run, so that the machine's load drifting over time falls on all of them
  const runs = variants.map((): { ms: number; setupMs?: number }[] => []);
  for (let r = 0; r < opts.runs; r++) {
    for (const [v, variant] of variants.entries()) runs[v].push(await once(net, variant, bytes, opts));
  }
  const rows = variants.map(({ method, secret }, v): Row => {
    const ms = runs[v].map(x => x.ms);
    const setups = runs[v].map(x => x.setupMs).filter((x): x is number => x !== undefined);
    const label = secret === 'none' ? '' : ` (${secret} secret)`;
    console.error(`${rate} ${megabytes} MB ${method}${label}: ${ms.map(x => x.toFixed(1)).join(' ')} ms`);
    return {
      rate,
      megabytes,
      method,
      secret,
      runsMs: ms,
      medianMs: median(ms),
      minMs: Math.min(...ms),
      maxMs: Math.max(...ms),
      ...(setups.length > 0 ? { setupMedianMs: median(setups) } : {}),
    };
  });
  for (const row of rows) {
    const without = rows.find(o => o.method === row.method && o.secret === 'without');
    if (row.secret !== 'with' || !without) continue;
    row.withOverWithout = row.medianMs / without.medianMs;
    if (row.setupMedianMs !== undefined && without.setupMedianMs !== undefined)
      row.setupWithOverWithout = row.setupMedianMs / without.setupMedianMs;
  }
  return rows;
}

function print(rows: Row[], opts: HostsLineRateOptions): void {
  console.log(
    `2 hosts (network namespaces, veth shaped by tc tbf): S bytes each way; medians of ${opts.runs} runs × ` +
      `${opts.repeats} repeats`,
  );
  console.log(
    '| link | MB | method | secret | median ms | min–max ms | line rate ms | line rate / median | ' +
      'plain TCP / median | with / without secret | set-up ms | set-up with / without |\n' +
      '|---|---|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const r of rows) {
    const line = lineRateMs(r.rate, r.megabytes * 1e6);
    const tcp = rows.find(t => t.rate === r.rate && t.megabytes === r.megabytes && t.method === 'tcp');
    const fixed = (x: number | undefined, digits: number) => (x === undefined ? '–' : x.toFixed(digits));
    console.log(
      `| ${r.rate} | ${r.megabytes} | ${r.method} | ${r.secret === 'none' ? '–' : r.secret} | ` +
        `${r.medianMs.toFixed(1)} | ${r.minMs.toFixed(1)}–${r.maxMs.toFixed(1)} | ` +
        (`${Number.isNaN(line) ? '–' : line.toFixed(1)} | ` +
          `${Number.isNaN(line) ? '–' : (line / r.medianMs).toFixed(2)} | ` +
          `${tcp ? (tcp.medianMs / r.medianMs).toFixed(2) : '–'} | ${fixed(r.withOverWithout, 3)} | ` +
          `${fixed(r.setupMedianMs, 1)} | ${fixed(r.setupWithOverWithout, 3)} |`),
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
