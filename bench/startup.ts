/**
 * `npm run bench -- startup [--runs R] [--out DIR]`: what starting a run costs the machine, by thread. A small `fit`
 * (dense 4→8→3, 48 samples, 2 epochs of batch 12, validationSplit 0.25: 6 steps, training is a sliver of it) on 1
 * and 2 devices, R runs each after one warm-up run in this process. Each run's CPU by thread group (tandem's threads
 * by the names they give themselves; the main thread; V8's and Node's own), sampled from /proc every 5 ms while the
 * threads live (a thread's last ≤5 ms before it ends are not seen: "unseen" is the process's exact total, from
 * /proc/self/stat, less the sampled groups), medians over the runs. Then what each thread's code costs to load, in a
 * fresh worker: tfjs (through tandem's #tfjs shim), and tandem's own modules that the thread's entry imports (how many,
 * and the time to import them one by one). The fits alternate between threads started on the bundles the build writes
 * (tools/bundle-entries.mjs) and on the modules one by one (TANDEM_BUNDLES=0), so both rows of a device count
 * come from the same minutes. bench/results/startup.json.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import * as tf from '@tensorflow/tfjs';
import { fit } from '../src/index.js';
import { runRecord } from './run-record.js';
import { THREAD_GROUPS, readThreadCpu, type ThreadGroup, type ThreadReading } from './thread-cpu.js';
import { ownCpuMs } from './process-cpu.js';
import { median } from './hosts-figures.js';
import { BUNDLES_ENV, bundledEntry } from '../src/bundled-entry.js';

export interface StartupBenchOptions {
  runs: number;
  out: string;
}

const SRC = fileURLToPath(new URL('../src/', import.meta.url));
/** Each thread's entry module (dist/src), as src/actors, src/data, src/fit and src/trainer start them. */
const ENTRIES = {
  compute: 'actors/compute-worker.js',
  comm: 'actors/comm-worker.js',
  loader: 'data/load-shard-task.js',
  'validate (fit)': 'fit/evaluate-worker.js',
  'validate (train)': 'trainer/validation-worker.js',
};

function tinyModel(): tf.LayersModel {
  const m = tf.sequential();
  m.add(tf.layers.dense({ units: 8, inputShape: [4], activation: 'relu' }));
  m.add(tf.layers.dense({ units: 3, activation: 'softmax' }));
  m.compile({ optimizer: 'sgd', loss: 'categoricalCrossentropy', metrics: ['accuracy'] });
  return m;
}

/** One fit's CPU by thread group (ms), its process total and wall time. */
async function measuredFit(devices: number, x: tf.Tensor, y: tf.Tensor): Promise<Record<string, number>> {
  const seen: ThreadReading = new Map();
  const sample = () => {
    for (const [tid, r] of readThreadCpu() ?? []) seen.set(tid, r);
  };
  sample();
  const before = new Map([...seen].map(([tid, r]) => [tid, r.ms]));
  const total0 = ownCpuMs();
  const began = performance.now();
  const timer = setInterval(sample, 5);
  const args = { epochs: 2, batchSize: 12, shuffle: false, verbose: 0 as const, devices, backend: 'cpu' };
  await fit(tinyModel(), x, y, { ...args, validationSplit: 0.25 }).finally(() => clearInterval(timer));
  sample();
  const wall = performance.now() - began;
  const by = Object.fromEntries(THREAD_GROUPS.map(g => [g, 0])) as Record<ThreadGroup, number>;
  for (const [tid, r] of seen) by[r.group] += r.ms - (before.get(tid) ?? 0);
  const total = ownCpuMs() - total0;
  const sampled = Object.values(by).reduce((a, b) => a + b, 0);
  return { ...by, unseen: total - sampled, total, wall };
}

/** `measuredFit` with tandem's threads started on their bundles or on their entry modules. */
async function fitStartedOn(threads: 'bundled' | 'modules', devices: number, x: tf.Tensor, y: tf.Tensor) {
  const before = process.env[BUNDLES_ENV];
  process.env[BUNDLES_ENV] = threads === 'bundled' ? '1' : '0';
  try {
    return await measuredFit(devices, x, y);
  } finally {
    if (before === undefined) delete process.env[BUNDLES_ENV];
    else process.env[BUNDLES_ENV] = before;
  }
}

/**
 * tandem's modules an entry imports (relative value imports, followed), the entry itself left out; and whether the
 * entry or any of them imports tfjs.
 */
function moduleGraph(entry: string): { files: string[]; loadsTfjs: boolean } {
  const seen = new Set<string>();
  let loadsTfjs = false;
  const walk = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    loadsTfjs ||= text.includes("from '#tfjs'");
    for (const m of text.matchAll(/^(?:import|export)\s+(?!type\b)[^'"]*?from\s+'(\.[^']+)'|^import\s+'(\.[^']+)'/gm))
      walk(path.resolve(path.dirname(file), m[1] ?? m[2]));
  };
  const root = path.join(SRC, entry);
  walk(root);
  seen.delete(root);
  return { files: [...seen], loadsTfjs };
}

const IMPORT_TIMER = `
const { parentPort, workerData } = require('node:worker_threads');
(async () => {
  let t = performance.now(); const r = {};
  if (workerData.tfjs) { await import(workerData.tfjs); r.tfjs = performance.now() - t; t = performance.now(); }
  for (const f of workerData.files) await import(require('node:url').pathToFileURL(f).href);
  r.tandem = performance.now() - t;
  parentPort.postMessage(r);
})();`;

/** What one thread's code costs to import in a fresh worker (ms): tfjs where the thread loads it, tandem's modules. */
async function importCost(files: string[], tfjs: boolean): Promise<{ tfjs: number; tandem: number }> {
  const workerData = { files, tfjs: tfjs ? new URL('../src/shims/tfjs.js', import.meta.url).href : undefined };
  const worker = new Worker(IMPORT_TIMER, { eval: true, workerData });
  try {
    const r = await new Promise<{ tfjs?: number; tandem: number }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    return { tfjs: r.tfjs ?? 0, tandem: r.tandem };
  } finally {
    await worker.terminate();
  }
}

async function importRows(runs: number) {
  const rows = [];
  for (const [thread, entry] of Object.entries(ENTRIES)) {
    const { files, loadsTfjs } = moduleGraph(entry);
    const costs = [];
    for (let i = 0; i < runs; i++) costs.push(await importCost(files, loadsTfjs));
    rows.push({
      thread,
      entry: `src/${entry.replace(/\.js$/, '.ts')}`,
      tandemModules: files.length,
      tfjsMs: loadsTfjs ? Math.round(median(costs.map(c => c.tfjs))) : 0,
      tandemModulesMs: Math.round(median(costs.map(c => c.tandem))),
    });
  }
  return rows;
}

export async function runStartupBench(options: StartupBenchOptions): Promise<void> {
  if (readThreadCpu() === undefined) throw new Error('the startup bench reads /proc (Linux only)');
  const compute = new URL(`../src/${ENTRIES.compute}`, import.meta.url);
  if (bundledEntry(compute, {}) === compute) throw new Error('no current bundles in dist/src: run npm run build');
  await tf.setBackend('cpu');
  const x = tf.randomNormal([48, 4]);
  const y = tf.oneHot(tf.randomUniform([48], 0, 3, 'int32'), 3).toFloat();
  const fits = [];
  for (const devices of [1, 2]) {
    await measuredFit(devices, x, y); // warm-up: this process's own imports and first compilations
    const runs: Record<'bundled' | 'modules', Record<string, number>[]> = { bundled: [], modules: [] };
    for (let i = 0; i < options.runs; i++)
      for (const threads of ['bundled', 'modules'] as const)
        runs[threads].push(await fitStartedOn(threads, devices, x, y));
    for (const threads of ['bundled', 'modules'] as const) {
      const row: Record<string, number | string> = { devices, threads };
      for (const key of Object.keys(runs[threads][0]))
        row[`${key}Ms`] = Math.round(median(runs[threads].map(r => r[key])));
      fits.push(row);
    }
  }
  tf.dispose([x, y]);
  const imports = await importRows(options.runs);
  console.log('\nCPU of one small fit (ms, median of %d), by thread group:', options.runs);
  console.table(fits);
  console.log('\nWhat each thread imports, in a fresh worker (ms, median of %d):', options.runs);
  console.table(imports);
  mkdirSync(options.out, { recursive: true });
  const file = path.join(options.out, 'startup.json');
  const result = { bench: 'startup', date: new Date().toISOString(), ...runRecord(), options, fits, imports };
  writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
  console.log(`\nwrote ${file}`);
}
