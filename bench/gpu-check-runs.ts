/**
 * The GPU check's runs (bench/gpu-check.ts's `correctness` and `devices`):
 *
 * correctness: alexnet-mini and resnet-mini (BatchNormalization) on 1 and 2 webgpu devices against the cpu engine on
 * the same steps, within 1e-4 (float32 summation order is all that differs): alexnet-mini and 1-device resnet-mini
 * against `trainReference` (one cpu engine, the whole batch), 2-device resnet-mini against 2 cpu devices (webgpu
 * normalises with each device's batch: `batchNorm: 'local'` on both sides). Where the machine has several GPUs, also
 * `tandem launch --gpus N --backend webgpu` against one process with N cpu devices (their weights.bin). Sizes as
 * test/webgpu-engine.gpu.ts and test/gpus-launch.gpu.ts, which pass on llvmpipe.
 *
 * devices: alexnet-mini on 1 and 2 webgpu devices of this one GPU: samples/s over the steady steps, and the step's
 * split (compute, exchange per group, update), from the run's summary.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { train, trainReference, type TrainConfig } from '../src/index.js';
import { findGpus } from '../src/world/gpu-inventory.js';

export const CHECK_TOLERANCE = 1e-4;
const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));

export interface CorrectnessRow {
  what: string;
  maxDiff: number;
  ok: boolean;
  seconds: number;
}
export interface CorrectnessReport {
  tolerance: number;
  rows: CorrectnessRow[];
  adapters: unknown[];
}
export interface DevicesRow {
  model: string;
  devices: number;
  globalBatch: number;
  samplesPerSecond: number;
  stepMs: number;
  computeMs: number;
  exchangeMs: number;
  updateMs: number;
  software: boolean;
}
export interface DevicesReport {
  rows: DevicesRow[];
}

type Weights = { values: Float32Array }[];

function worst(a: Weights, b: Weights): number {
  if (a.length !== b.length) return Infinity;
  let m = 0;
  a.forEach((w, i) => {
    if (w.values.length !== b[i].values.length) m = Infinity;
    else w.values.forEach((v, j) => (m = Math.max(m, Math.abs(v - b[i].values[j]))));
  });
  return Number.isNaN(m) ? Infinity : m;
}

const BASE: TrainConfig = {
  data: 'synthetic-images',
  classes: 4,
  datasetSize: 32,
  batch: 8,
  seed: 3,
  optimizer: 'sgd',
  lr: 0.05,
  momentum: 0.9,
};

export async function runCorrectness(out: string, quick: boolean): Promise<number> {
  const rows: CorrectnessRow[] = [];
  const adapters: unknown[] = [];
  const report = (): CorrectnessReport => ({ tolerance: CHECK_TOLERANCE, rows, adapters });
  const record = (what: string, maxDiff: number, since: number) => {
    const row = { what, maxDiff, ok: maxDiff < CHECK_TOLERANCE, seconds: (Date.now() - since) / 1000 };
    rows.push(row);
    console.log(`correctness ${row.ok ? 'ok' : 'FAIL'}: ${what}: max |diff| ${maxDiff.toExponential(2)}`);
    writeFileSync(out, JSON.stringify(report(), null, 2) + '\n'); // after each row: a timeout keeps what ran
  };
  // alexnet-mini: 12x12, 4 steps (at 16x16 sgd+momentum amplifies ulps past 1e-4 by step 4: webgpu-engine.gpu.ts).
  const alex: TrainConfig = { ...BASE, model: 'alexnet-mini', imageSize: [12, 12, 3], strategy: 'per-layer', steps: 4 };
  let since = Date.now();
  const ref = await trainReference({ ...alex, backend: 'cpu' });
  for (const devices of [1, 2]) {
    const run = await train({ ...alex, backend: 'webgpu', devices });
    adapters.push(...(run.engineDevices ?? []));
    record(
      `alexnet-mini, ${devices} webgpu device(s) vs the cpu reference, 4 steps`,
      worst(run.weights, ref.weights),
      since,
    );
    since = Date.now();
  }
  const res: TrainConfig = { ...BASE, model: 'resnet-mini', imageSize: [8, 8, 3], steps: 2 };
  const resRef = await trainReference({ ...res, backend: 'cpu' });
  const one = await train({ ...res, backend: 'webgpu', devices: 1 });
  const d1 = Math.max(worst(one.weights, resRef.weights), worst(one.nonTrainableWeights, resRef.nonTrainableWeights));
  record('resnet-mini, 1 webgpu device vs the cpu reference (weights and moving statistics), 2 steps', d1, since);
  since = Date.now();
  const local: TrainConfig = { ...res, devices: 2, batchNorm: 'local' };
  const [gpu2, cpu2] = [await train({ ...local, backend: 'webgpu' }), await train({ ...local, backend: 'cpu' })];
  const d2 = Math.max(worst(gpu2.weights, cpu2.weights), worst(gpu2.nonTrainableWeights, cpu2.nonTrainableWeights));
  record('resnet-mini, 2 webgpu devices vs 2 cpu devices (batch-norm local), 2 steps', d2, since);
  const inventory = findGpus();
  if (inventory.kind === 'hardware' && inventory.gpus.length > 1 && !quick) {
    since = Date.now();
    record(
      `alexnet-mini, tandem launch --gpus ${inventory.gpus.length} vs one process`,
      await launchDiff(inventory.gpus.length),
      since,
    );
  } else console.log('correctness: launch --gpus N skipped (this machine has fewer than 2 GPUs)');
  writeFileSync(out, JSON.stringify(report(), null, 2) + '\n');
  return rows.every(r => r.ok) ? 0 : 1;
}

function runCli(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('close', code => (code === 0 ? resolve() : reject(new Error(`tandem ${args[0]} exited ${code}`))));
  });
}

/** `tandem launch --gpus N --backend webgpu` against `tandem train --devices N --backend cpu`: their weights.bin. */
async function launchDiff(gpus: number): Promise<number> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-gpu-check-launch-'));
  try {
    const flags = [
      '--model',
      'alexnet-mini',
      '--data',
      'synthetic-images',
      '--image-size',
      '12x12x3',
      '--classes',
      '4',
    ];
    flags.push('--dataset-size', '64', '--batch', String(4 * gpus), '--steps', '2', '--seed', '3');
    flags.push('--strategy', 'per-layer', '--json');
    const [a, b] = [path.join(dir, 'webgpu'), path.join(dir, 'cpu')];
    await runCli(['launch', '--gpus', String(gpus), '--backend', 'webgpu', ...flags, '--out', a]);
    await runCli(['train', '--devices', String(gpus), '--backend', 'cpu', ...flags, '--out', b]);
    const [x, y] = [a, b].map(d => new Float32Array(new Uint8Array(readFileSync(path.join(d, 'weights.bin'))).buffer));
    return worst([{ values: x }], [{ values: y }]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function runDevices(out: string, quick: boolean): Promise<number> {
  const size = quick ? { imageSize: 16, batch: 8, steps: 6 } : { imageSize: 32, batch: 64, steps: 12 };
  const rows: DevicesRow[] = [];
  for (const devices of [1, 2]) {
    const run = await train({
      ...BASE,
      model: 'alexnet-mini',
      classes: 10,
      imageSize: [size.imageSize, size.imageSize, 3],
      datasetSize: Math.max(256, 4 * devices * size.batch),
      batch: devices * size.batch,
      steps: size.steps,
      lr: 0.01,
      strategy: 'per-layer',
      backend: 'webgpu',
      devices,
    });
    const row: DevicesRow = {
      model: 'alexnet-mini',
      devices,
      globalBatch: devices * size.batch,
      samplesPerSecond: (devices * size.batch) / (run.steadyStepMs / 1000),
      stepMs: run.steadyStepMs,
      computeMs: run.timings.steadyComputeMs,
      exchangeMs: run.timings.meanExchangeMs,
      updateMs: run.timings.meanUpdateMs,
      software: (run.engineDevices ?? []).some(d => d.software),
    };
    rows.push(row);
    console.log(`devices: ${JSON.stringify(row)}`);
  }
  writeFileSync(out, JSON.stringify({ rows }, null, 2) + '\n');
  return 0;
}
