/**
 * `npm run bench -- watch [--model M] [--devices N] [--steps N] [--runs N] [--batch N] [--variants …] [--out DIR]`:
 * what watching a run costs. The same `tandem train` (default alexnet-mini on synthetic 32x32x3 images, native backend,
 * 1 device) runs plain, with `--tensorboard DIR`, with `--dashboard` (a client reading the page's server-sent events
 * all along) and with both, each first in turn, `runs` times each. One run's median moves several percent on a shared
 * 2-core machine, so every run's steady steps (after the warm-up) are pooled per variant: samples/s is the global batch
 * over the pooled median step time. Beside it, the process's CPU per steady step (every thread, from /proc): the work
 * watching adds, which a spare core hides from the step time but a full machine would pay. Table on stdout, JSON in
 * OUT/watch.json, labelled "machine busy" when the load average before the runs was over half the cores.
 */
import { spawn } from 'node:child_process';
import { get } from 'node:http';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { meterStepCpu } from './process-cpu.js';
import { runRecord } from './run-record.js';

const BIN = fileURLToPath(new URL('../../bin/tandem.js', import.meta.url));

export interface WatchBenchOptions {
  /** Which runs (default all four): plain, tensorboard, dashboard, watched (both). */
  variants?: Variant[];
  model: string;
  devices: number;
  backend: string;
  steps: number;
  /** Steps not timed at the start of each run. */
  warmup: number;
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

/** /proc/stat's first line: [steal ticks, all ticks] (zeros where /proc cannot tell). */
function stealTicks(): [number, number] {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
    return [f[7] ?? 0, f.reduce((a, b) => a + b, 0)];
  } catch {
    return [0, 0];
  }
}

const stealShare = (a: [number, number], b: [number, number]) => (100 * (b[0] - a[0])) / Math.max(1, b[1] - a[1]);

interface OneRun {
  /** Each steady step's time (ms), steps warmup+1 … steps. */
  stepMs: number[];
  /** The process's CPU (ms, every thread) per steady step. */
  cpuMsPerStep: number | undefined;
  /** Its main thread's alone (where watching works: the hooks, the writer, the page's server). */
  mainCpuMsPerStep: number | undefined;
  eventBytes: number;
}

/** One run of `tandem train`: its steady steps' times, CPU per step and, served, the bytes its page client read. */
async function oneRun(variant: Variant, opts: WatchBenchOptions, dir: string): Promise<OneRun> {
  const out = path.join(dir, `${variant}-out`);
  const args = [
    ...['train', '--model', opts.model, '--data', 'synthetic-images', '--devices', String(opts.devices)],
    ...['--backend', opts.backend, '--batch', String(opts.batch), '--steps', String(opts.steps)],
    ...['--out', out, '--overwrite', '--json', ...FLAGS[variant](dir)],
  ];
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const cpu = meterStepCpu(child, opts.warmup, opts.steps);
  const mainCpu = meterStepCpu(child, opts.warmup, opts.steps, true);
  let reader: Promise<number> | undefined;
  let pending = '';
  const stepMs: number[] = [];
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    const lines = (pending + d).split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      const served = variant === 'watched' || variant === 'dashboard';
      const m = served && !reader ? /"event":"dashboard".*"url":"([^"]+)"/.exec(line) : null;
      if (m) reader = readEvents(m[1]);
      if (!line.startsWith('{"event":"step"')) continue;
      const step = JSON.parse(line) as { step: number; stepMs: number };
      if (step.step > opts.warmup) stepMs.push(step.stepMs);
    }
  });
  const code = await new Promise<number | null>(resolve => child.on('exit', c => resolve(c)));
  if (code !== 0) throw new Error(`tandem train ${args.join(' ')} exited with ${code}`);
  if (stepMs.length !== opts.steps - opts.warmup)
    throw new Error(`tandem train printed ${stepMs.length} steady steps, expected ${opts.steps - opts.warmup}`);
  return { stepMs, cpuMsPerStep: cpu(), mainCpuMsPerStep: mainCpu(), eventBytes: (await reader) ?? 0 };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

interface VariantResult {
  /** The global batch over the pooled median steady step time. */
  samplesPerSecond: number;
  pooledMedianStepMs: number;
  /** Each run's own median, to show the spread pooling removes. */
  runSamplesPerSecond: number[];
  /** Median over runs of the process's CPU per steady step (ms). */
  cpuMsPerStep: number | undefined;
  /** The same of its main thread alone. */
  mainCpuMsPerStep: number | undefined;
  /** Relative to plain, percent (0 for plain). */
  vsPlainPercent: number;
  /** Median over rounds of (this variant's samples/s / plain's in the same round − 1), percent: slow drift cancels. */
  pairedVsPlainPercent: number;
  cpuVsPlainPercent: number | undefined;
}

type Ran = OneRun & { variant: Variant; run: number };

/** Per round, this variant's samples/s over plain's in the same round, minus one (percent); the median of those. */
function pairedPercent(runs: Ran[], v: Variant): number {
  const inRound = (round: number, w: Variant) => runs.find(r => r.run === round && r.variant === w);
  const ratios = [...new Set(runs.map(r => r.run))].flatMap(round => {
    const a = inRound(round, v),
      p = inRound(round, 'plain');
    return a && p ? [100 * (median(p.stepMs) / median(a.stepMs) - 1)] : [];
  });
  return median(ratios);
}

function summarize(runs: Ran[], variants: readonly Variant[], batch: number) {
  const of = (v: Variant) => runs.filter(r => r.variant === v);
  const base = (v: Variant) => {
    const mine = of(v);
    const pooledMedianStepMs = median(mine.flatMap(r => r.stepMs));
    const medianOf = (xs: (number | undefined)[]) => {
      const known = xs.filter((c): c is number => c !== undefined);
      return known.length ? median(known) : undefined;
    };
    return {
      samplesPerSecond: (batch * 1000) / pooledMedianStepMs,
      pooledMedianStepMs,
      runSamplesPerSecond: mine.map(r => (batch * 1000) / median(r.stepMs)),
      cpuMsPerStep: medianOf(mine.map(r => r.cpuMsPerStep)),
      mainCpuMsPerStep: medianOf(mine.map(r => r.mainCpuMsPerStep)),
    };
  };
  const plain = base('plain');
  const pct = (a: number, b: number) => (100 * (a - b)) / b;
  return Object.fromEntries(
    variants.map(v => {
      const b = base(v);
      const cpuVs =
        b.cpuMsPerStep !== undefined && plain.cpuMsPerStep ? pct(b.cpuMsPerStep, plain.cpuMsPerStep) : undefined;
      const vsPlainPercent = pct(b.samplesPerSecond, plain.samplesPerSecond);
      return [v, { ...b, vsPlainPercent, pairedVsPlainPercent: pairedPercent(runs, v), cpuVsPlainPercent: cpuVs }];
    }),
  ) as Record<Variant, VariantResult>;
}

function printTable(results: Record<Variant, VariantResult>, variants: readonly Variant[]): void {
  const f = (x: number | undefined, d = 1) => (x === undefined ? 'n/a' : x.toFixed(d));
  const signed = (x: number | undefined) => (x === undefined ? 'n/a' : `${x >= 0 ? '+' : ''}${x.toFixed(1)}%`);
  console.log(
    "\n| run | samples/s (pooled steady median) | vs plain | vs plain, paired by round | each run's median, " +
      'min–max | CPU ms/step | CPU vs plain | main thread CPU ms/step |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const v of variants) {
    const r = results[v];
    const spread = `${f(Math.min(...r.runSamplesPerSecond))}–${f(Math.max(...r.runSamplesPerSecond))}`;
    const vs = v === 'plain' ? '' : signed(r.vsPlainPercent);
    const paired = v === 'plain' ? '' : signed(r.pairedVsPlainPercent);
    const cpuVs = v === 'plain' ? '' : signed(r.cpuVsPlainPercent);
    console.log(
      `| ${LABELS[v]} | ${f(r.samplesPerSecond)} | ${vs} | ${paired} | ${spread} | ${f(r.cpuMsPerStep)} | ${cpuVs} | ` +
        `${f(r.mainCpuMsPerStep, 2)} |`,
    );
  }
}

export async function runWatchBench(opts: WatchBenchOptions): Promise<void> {
  const { model, devices, backend, batch, steps, warmup } = opts;
  console.log(
    `watch bench: ${model}, synthetic 32x32x3, ${devices} device(s), ${backend}, batch ${batch}, ${steps} steps ` +
      `(${warmup} warm-up); plain vs --tensorboard / --dashboard with a client, each first in turn, ${opts.runs} ` +
      `runs each, steady steps pooled; ${os.cpus().length} cores`,
  );
  const variants = opts.variants ?? VARIANTS;
  if (!variants.includes('plain')) throw new RangeError('bench watch: --variants must include plain');
  const stealBefore = stealTicks();
  const loadBefore = os.loadavg()[0]; // the bench's own runs load the machine: busy is judged before them
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-watch-bench-'));
  const runs: Ran[] = [];
  try {
    for (let run = 0; run < opts.runs; run++) {
      const order = variants.map((_, i) => variants[(i + run) % variants.length]); // each first in turn
      for (const variant of order) {
        const r = await oneRun(variant, opts, dir);
        runs.push({ variant, run, ...r });
        const cpu = r.cpuMsPerStep === undefined ? '' : `, ${r.cpuMsPerStep.toFixed(1)} ms CPU/step`;
        console.log(`  run ${run + 1} ${variant}: ${((batch * 1000) / median(r.stepMs)).toFixed(1)} samples/s${cpu}`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const stealPercent = stealShare(stealBefore, stealTicks());
  const results = summarize(runs, variants, batch);
  printTable(results, variants);
  const record = runRecord();
  const busy = loadBefore > record.cores / 2;
  console.log(`\nCPU time stolen by the hypervisor during the runs: ${stealPercent.toFixed(1)}% of the machine`);
  if (busy) console.log(`\nmachine busy: load average ${loadBefore.toFixed(2)} before the runs, ${record.cores} cores`);
  mkdirSync(opts.out, { recursive: true });
  const file = path.join(opts.out, 'watch.json');
  const label = busy ? { label: 'machine busy' } : {};
  const perRun = runs.map(({ stepMs, ...r }) => ({ ...r, medianStepMs: median(stepMs) }));
  const result = { ...record, ...label, model, devices, backend, steps, warmup, batch, runsEach: opts.runs };
  writeFileSync(file, JSON.stringify({ ...result, loadBefore, stealPercent, results, runs: perRun }, null, 2) + '\n');
  console.log(`\n${file}`);
}
