/**
 * `npm run bench -- watch [--steps N] [--runs N] [--batch N] [--out DIR]`: what watching a run costs. The same
 * `tandem train` (mlp on synthetic 32x32x3 images, 2 devices, --out) runs plain, with `--tensorboard DIR`, with
 * `--dashboard` (a client reading the page's server-sent events all along) and with both, each first in turn, `runs`
 * times each; each run's steady samples/s is the global batch over its summary's steady step time (after the warm-up
 * steps). Table on stdout, JSON in bench/results/watch.json, labelled "machine busy" when the load average before the
 * runs was over half the cores.
 */
import { spawn } from 'node:child_process';
import { get } from 'node:http';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runRecord } from './run-record.js';

const BIN = fileURLToPath(new URL('../../bin/tandem.js', import.meta.url));

export interface WatchBenchOptions {
  /** Which runs (default all four): plain, tensorboard, dashboard, watched (both). */
  variants?: Variant[];
  steps: number;
  runs: number;
  batch: number;
  out: string;
}

export type Variant = 'plain' | 'tensorboard' | 'dashboard' | 'watched';
export const VARIANTS: readonly Variant[] = ['plain', 'tensorboard', 'dashboard', 'watched'];
const FLAGS: Record<Variant, (dir: string) => string[]> = {
  plain: () => [],
  tensorboard: dir => ['--tensorboard', path.join(dir, 'tb')],
  dashboard: () => ['--dashboard'],
  watched: dir => ['--tensorboard', path.join(dir, 'tb'), '--dashboard'],
};
const LABELS: Record<Variant, string> = {
  plain: 'plain',
  tensorboard: '--tensorboard',
  dashboard: '--dashboard, a client',
  watched: '--tensorboard --dashboard, a client',
};

/** Reads the dashboard's event stream until the server ends it; resolves with the bytes read. */
function readEvents(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    get(new URL('events', url), res => {
      let bytes = 0;
      res.on('data', (d: Buffer) => (bytes += d.length));
      res.on('end', () => resolve(bytes));
      res.on('error', reject);
    }).on('error', reject);
  });
}

/** One run of `tandem train`; its steady samples/s and, watched, the bytes its dashboard client read. */
async function oneRun(
  variant: Variant,
  opts: WatchBenchOptions,
  dir: string,
): Promise<{ samplesPerSecond: number; eventBytes: number }> {
  const out = path.join(dir, `${variant}-out`);
  const args = [
    ...['train', '--model', 'mlp', '--data', 'synthetic-images', '--devices', '2', '--backend', 'cpu'],
    ...['--batch', String(opts.batch), '--steps', String(opts.steps), '--out', out, '--overwrite', '--json'],
    ...FLAGS[variant](dir),
  ];
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  let reader: Promise<number> | undefined;
  let text = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    text += d;
    const served = variant === 'watched' || variant === 'dashboard';
    const m = served && !reader ? /"event":"dashboard"[^\n]*"url":"([^"]+)"/.exec(text) : null;
    if (m) reader = readEvents(m[1]);
  });
  const code = await new Promise<number | null>(resolve => child.on('exit', c => resolve(c)));
  if (code !== 0) throw new Error(`tandem train ${args.join(' ')} exited with ${code}`);
  const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8')) as { steadyStepMs: number };
  return { samplesPerSecond: (opts.batch * 1000) / summary.steadyStepMs, eventBytes: (await reader) ?? 0 };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

export async function runWatchBench(opts: WatchBenchOptions): Promise<void> {
  console.log(
    `watch bench: mlp, synthetic 32x32x3, 2 devices, batch ${opts.batch}, ${opts.steps} steps; plain vs ` +
      `--tensorboard --dashboard with a client, alternated, ${opts.runs} runs each; ${os.cpus().length} cores`,
  );
  const variants = opts.variants ?? VARIANTS;
  const loadBefore = os.loadavg()[0]; // the bench's own runs load the machine: busy is judged before them
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-watch-bench-'));
  const runs: { variant: Variant; run: number; samplesPerSecond: number; eventBytes: number }[] = [];
  try {
    for (let run = 0; run < opts.runs; run++) {
      const order = variants.map((_, i) => variants[(i + run) % variants.length]); // each first in turn
      for (const variant of order) {
        const r = await oneRun(variant, opts, dir);
        runs.push({ variant, run, ...r });
        console.log(`  run ${run + 1} ${variant}: ${r.samplesPerSecond.toFixed(1)} samples/s`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const of = (v: Variant) => median(runs.filter(r => r.variant === v).map(r => r.samplesPerSecond));
  const medians = Object.fromEntries(variants.map(v => [v, of(v)])) as Record<Variant, number>;
  const plain = medians.plain,
    watched = medians.watched;
  const apartPercent = (100 * (watched - plain)) / plain;
  const record = runRecord();
  const busy = loadBefore > record.cores / 2;
  console.log('\n| run | median samples/s (steady) | vs plain |\n|---|---:|---:|');
  for (const v of variants)
    console.log(
      `| ${LABELS[v]} | ${medians[v].toFixed(1)} | ` +
        `${v === 'plain' ? '' : `${((100 * (medians[v] - plain)) / plain).toFixed(1)}%`} |`,
    );
  if (busy) console.log(`\nmachine busy: load average ${loadBefore.toFixed(2)} before the runs, ${record.cores} cores`);
  mkdirSync(opts.out, { recursive: true });
  const file = path.join(opts.out, 'watch.json');
  const { steps, batch } = opts;
  const label = busy ? { label: 'machine busy' } : {};
  const result = { ...record, ...label, steps, batch, runsEach: opts.runs, loadBefore, ...medians, apartPercent, runs };
  writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
  console.log(`\n${file}`);
}
