/**
 * `npm run bench -- gpu [--gpus 1,2] [--models alexnet-mini,resnet-mini] [--steps N] [--batch B] [--image-size S]
 * [--quick] [--out DIR]`:
 * tandem on GPUs through the `webgpu` engine, one process per GPU (`tandem launch --gpus N --backend webgpu`), for
 * each model and GPU count: samples/s and ms per step over the steady steps (every step but the first, which
 * compiles the shaders), the speedup of N GPUs over 1 (the same batch per GPU: N times the global batch), the adapter
 * each process ran on (as the webgpu engine reports it: name, vendor, driver), and one timeline per run: its Chrome
 * trace and `tandem trace --png` of its last steps under OUT/gpu/.
 *
 * The GPU counts default to 1 and the machine's GPU count (gpu-inventory.ts); with no GPU (Mesa's llvmpipe, the
 * software Vulkan driver on the CPU) to 1 and 2, and those rows are labelled "software Vulkan (CPU), not a GPU
 * measurement". resnet-mini (BatchNormalization) runs with `--batch-norm local` on 2+ GPUs (sync BN reads inside
 * forward, which webgpu cannot). Defaults are sized for a real GPU; `--quick` for the software driver.
 * Writes OUT/gpu.json.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findGpus } from '../src/world/gpu-inventory.js';
import { describeEngineDevice, type EngineDevice } from '../src/engine/engine.js';

const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
/** A run's whole time limit (llvmpipe is slow; a real GPU needs a fraction). */
const RUN_TIMEOUT_MS = 30 * 60_000;

export interface GpuBenchOptions {
  /** GPU counts to run (default: 1 and the machine's count, at least 2). */
  gpus?: number[];
  models: string[];
  steps: number;
  /** Samples per GPU per step. */
  batch: number;
  /** Square input images of this side (3 channels). */
  imageSize: number;
  out: string;
}

/** Real-GPU defaults, and `--quick` ones for the software driver. */
export const GPU_BENCH_DEFAULTS = { steps: 30, batch: 64, imageSize: 32 } as const;
export const GPU_BENCH_QUICK = { steps: 4, batch: 8, imageSize: 16 } as const;
export const GPU_BENCH_MODELS = ['alexnet-mini', 'resnet-mini'];

/** One run's result. */
export interface GpuRow {
  model: string;
  gpus: number;
  globalBatch: number;
  /** Steps 2..N: the global batch over the mean step. */
  samplesPerSecond: number;
  stepMs: number;
  /** samples/s over the 1-GPU run's of the same model. */
  speedup?: number;
  /** Per GPU process, the adapter its device ran on. */
  adapters: EngineDevice[];
  software: boolean;
  trace: string;
  png?: string;
  flags: string[];
}

/** The GPU counts: the machine's (1 and all of them), at least 1 and 2 on the software driver. */
export function defaultGpuCounts(): number[] {
  const inventory = findGpus();
  const n = inventory.kind === 'hardware' ? inventory.gpus.length : 2;
  return n > 1 ? [1, n] : [1];
}

export async function runGpuBench(opts: GpuBenchOptions): Promise<void> {
  const counts = opts.gpus ?? defaultGpuCounts();
  const inventory = findGpus();
  const dir = path.join(opts.out, 'gpu');
  mkdirSync(dir, { recursive: true });
  const machine =
    inventory.kind === 'hardware'
      ? `${inventory.gpus.length} GPU(s): ` +
        `${inventory.gpus.map(g => g.name ?? `${g.vendor} ${g.pciAddress}`).join(', ')}`
      : 'no NVIDIA, AMD or Intel GPU: the software Vulkan driver (llvmpipe, on the CPU)';
  console.log(
    `gpu bench: ${opts.models.join(', ')} on ${counts.join(', ')} GPU process(es) (tandem launch --gpus N --backend ` +
      `webgpu); ` +
      (`${opts.batch} samples per GPU per step, ${opts.imageSize}x${opts.imageSize}x3, ${opts.steps} steps (the ` +
        `first untimed); this machine: ${machine}`),
  );
  const rows: GpuRow[] = [];
  for (const model of opts.models) {
    for (const gpus of counts) {
      const row = await runOne(model, gpus, opts, dir);
      const one = rows.find(r => r.model === model && r.gpus === 1);
      if (one) row.speedup = row.samplesPerSecond / one.samplesPerSecond;
      rows.push(row);
      row.adapters.forEach((a, k) =>
        console.log(`  ${model}, ${gpus} GPU(s): GPU process ${k} ran on ${describeEngineDevice(a)}`),
      );
    }
  }
  printTable(rows);
  const file = path.join(opts.out, 'gpu.json');
  writeFileSync(file, JSON.stringify({ machine, options: { ...opts, gpus: counts }, rows }, null, 2) + '\n');
  console.log(`\nwrote ${file}; timelines under ${dir}/`);
}

/** `tandem launch --gpus N --backend webgpu` on `model`, its trace drawn afterwards. */
async function runOne(model: string, gpus: number, opts: GpuBenchOptions, dir: string): Promise<GpuRow> {
  const name = `${model}-${gpus}gpu`;
  const trace = path.join(dir, `${name}.trace.json`);
  const flags = [
    '--model',
    model,
    '--data',
    'synthetic-images',
    '--image-size',
    `${opts.imageSize}x${opts.imageSize}x3`,
    '--classes',
    '10',
    '--dataset-size',
    String(Math.max(256, 4 * gpus * opts.batch)),
    '--batch',
    String(gpus * opts.batch),
    '--steps',
    String(opts.steps),
    '--optimizer',
    'sgd',
    '--lr',
    '0.01',
    '--momentum',
    '0.9',
    '--strategy',
    'per-layer',
    ...(model === 'resnet-mini' && gpus > 1 ? ['--batch-norm', 'local'] : []),
  ];
  console.log(`\n${name}: tandem launch --gpus ${gpus} --backend webgpu ${flags.join(' ')}`);
  const out = await runCli(
    ['launch', '--gpus', String(gpus), '--backend', 'webgpu', ...flags, '--trace', trace, '--json', '--verbose'],
    name,
  );
  const byProcess = processLines(out, gpus, name);
  const steps = byProcess[0].filter(l => l.event === 'step' && (l.step as number) > 1).map(l => l.stepMs as number);
  if (steps.length === 0) throw new Error(`gpu bench: ${name}: no step after the first (give --steps 2 or more)`);
  const stepMs = steps.reduce((a, b) => a + b, 0) / steps.length;
  const adapters = byProcess.map((lines, k) => {
    const summary = lines.find(l => l.event === 'summary') as { engineDevices?: EngineDevice[] } | undefined;
    const device = summary?.engineDevices?.[0];
    if (!device) throw new Error(`gpu bench: ${name}: GPU process ${k} reported no adapter (summary.engineDevices)`);
    return device;
  });
  const png = await drawTimeline(trace, path.join(dir, `${name}.png`), name);
  return {
    model,
    gpus,
    globalBatch: gpus * opts.batch,
    samplesPerSecond: (gpus * opts.batch) / (stepMs / 1000),
    stepMs,
    adapters,
    software: adapters.some(a => a.software),
    trace,
    png,
    flags,
  };
}

/** The JSON lines of each GPU process (`[gpu k] {…}` in the launcher's stdout). */
function processLines(stdout: string, gpus: number, name: string): Record<string, unknown>[][] {
  const out: Record<string, unknown>[][] = Array.from({ length: gpus }, () => []);
  for (const line of stdout.split('\n')) {
    const m = /^\[gpu (\d+)\] (\{.*)$/.exec(line);
    if (!m) continue;
    try {
      out[Number(m[1])]?.push(JSON.parse(m[2]) as Record<string, unknown>);
    } catch {
      /* not a JSON line */
    }
  }
  out.forEach((lines, k) => {
    if (lines.length === 0)
      throw new Error(`gpu bench: ${name}: GPU process ${k} printed nothing:\n${stdout.slice(-2000)}`);
  });
  return out;
}

/** `tandem trace TRACE --png OUT --last 3`; undefined (with the reason printed) when it cannot draw. */
async function drawTimeline(trace: string, png: string, name: string): Promise<string | undefined> {
  try {
    await runCli(['trace', trace, '--png', png, '--last', '3'], `${name} timeline`);
    return png;
  } catch (err) {
    console.log(`  (no timeline picture for ${name}: ${(err as Error).message.split('\n')[0]})`);
    return undefined;
  }
}

/** Runs the tandem CLI; resolves with its stdout when it exits 0, else rejects with its stderr's tail. */
function runCli(args: string[], label: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '',
      stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
    });
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr = (stderr + s).slice(-4000);
    });
    const timer = setTimeout(() => child.kill('SIGTERM'), RUN_TIMEOUT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(stdout);
      else reject(new Error(`gpu bench: ${label} ended with ${signal ?? `code ${code}`}:\n${stderr}`));
    });
  });
}

function printTable(rows: GpuRow[]): void {
  console.log(
    '\n| model | GPUs | global batch | samples/s | ms/step | speedup vs 1 GPU | adapter ' +
      '|\n|---|---:|---:|---:|---:|---:|---|',
  );
  for (const r of rows) {
    const names = [...new Set(r.adapters.map(a => `${a.name} (${a.vendor})`))].join(', ');
    const adapter = `${names}${r.software ? ': software Vulkan (CPU), not a GPU measurement' : ''}`;
    console.log(
      `| ${r.model} | ${r.gpus} | ${r.globalBatch} | ${r.samplesPerSecond.toFixed(1)} | ${r.stepMs.toFixed(1)} | ` +
        `${r.speedup === undefined ? '' : `${r.speedup.toFixed(2)}x`} | ${adapter} |`,
    );
  }
}
