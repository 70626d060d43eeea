/**
 * `npm run bench -- data [--quick] [--steps N] [--batch N] [--models a,b] [--image-size S]`: what reading data costs
 * against what training takes. Loading alone, in samples/s: a JPEG folder and a PNG folder of generated 96x72 photos
 * (decoded and resized by sharp into a cold cache; then read back from the warm cache, as the loaders do), and a CSV of
 * 32 features (parsed by csv-parse, then read), and a tf.data pipeline (generator, map to [0, 1], batch) iterated as
 * fitDataset and a tf.data data module iterate it. Training, in samples/s, on the JPEG folder with the cache warm
 * (alexnet-mini and mnist-node, 2 devices), with the share of each step the main thread waited for the loaders
 * (TrainSummary timings.loadWaitShare: meanLoadWaitMs / meanStepMs). Prints a table; writes bench/results/data.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import jpeg from 'jpeg-js';
import * as tf from '@tensorflow/tfjs';
import { train } from '../src/index.js';
import { openImageFolder, prepareImageFolder } from '../src/data/image-folder.js';
import { readCsv, csvStamp } from '../src/data/csv-dataset.js';
import type { Dataset } from '../src/data/dataset.js';
import { PNG } from 'pngjs';
import { runRecord } from './run-record.js';

export interface DataBenchOptions {
  images: number;
  rows: number;
  steps: number;
  batch: number;
  imageSize: number;
  models: string[];
  out: string;
}

export const DATA_BENCH_DEFAULTS = { images: 1024, rows: 20_000, steps: 60, batch: 64, imageSize: 32 } as const;
export const DATA_BENCH_QUICK = { images: 96, rows: 500, steps: 6, batch: 16, imageSize: 16 } as const;

interface Row {
  what: string;
  samples: number;
  seconds: number;
  samplesPerSecond: number;
  /** The run's whole share of step time waiting for data (summary.json's timings.loadWaitShare). */
  dataWaitShare?: number;
  /** The same after the first WAIT_WARMUP_STEPS steps (per step: StepMetrics.dataWaitMs over stepMs). */
  steadyDataWaitShare?: number;
}

const W = 96,
  H = 72,
  CLASSES = 8;

/** A photo-like picture: a gradient per class, stripes and noise. */
function picture(c: number, i: number): Buffer {
  const d = Buffer.alloc(W * H * 4);
  let s = (i * 2654435761 + c) >>> 0;
  for (let k = 0; k < W * H; k++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const x = k % W,
      y = Math.floor(k / W);
    const stripe = ((x * (c + 1) + y) >> 3) % 2;
    d[k * 4] = (x * 2 + c * 30 + (s & 31)) & 255;
    d[k * 4 + 1] = (y * 3 + stripe * 90) & 255;
    d[k * 4 + 2] = (c * 29 + ((s >> 8) & 63)) & 255;
    d[k * 4 + 3] = 255;
  }
  return d;
}

function pngBytes(rgba: Buffer, w: number, h: number): Buffer {
  const png = new PNG({ width: w, height: h });
  rgba.copy(png.data);
  return PNG.sync.write(png);
}

function writeFolder(dir: string, images: number, kind: 'jpg' | 'png'): void {
  for (let i = 0; i < images; i++) {
    const c = i % CLASSES;
    mkdirSync(path.join(dir, `class-${c}`), { recursive: true });
    const rgba = picture(c, i);
    const bytes = kind === 'jpg' ? jpeg.encode({ data: rgba, width: W, height: H }, 85).data : pngBytes(rgba, W, H);
    writeFileSync(path.join(dir, `class-${c}`, `${i}.${kind}`), bytes);
  }
}

function readAll(ds: Dataset): number {
  const out = new Float32Array(ds.sampleShape.reduce((a, b) => a * b, 1));
  let sum = 0;
  for (let i = 0; i < ds.size; i++) sum += ds.read(i, out, 0);
  return sum;
}

function row(what: string, samples: number, ms: number, extra: Partial<Row> = {}): Row {
  return { what, samples, seconds: ms / 1000, samplesPerSecond: samples / (ms / 1000), ...extra };
}

async function folderRows(root: string, kind: 'jpg' | 'png', o: DataBenchOptions): Promise<Row[]> {
  const dir = path.join(root, kind);
  writeFolder(dir, o.images, kind);
  const shape = [o.imageSize, o.imageSize, 3] as const;
  const cacheDir = path.join(root, `${kind}-cache`);
  let t = performance.now();
  const { stamp } = await prepareImageFolder(dir, shape, cacheDir);
  const cold = row(`${kind.toUpperCase()} folder: decode + resize (cold cache)`, o.images, performance.now() - t);
  t = performance.now();
  await prepareImageFolder(dir, shape, cacheDir);
  const ds = await openImageFolder({ kind: 'image-folder', dir, imageShape: [...shape], cacheDir, stamp });
  readAll(ds);
  return [cold, row(`${kind.toUpperCase()} folder: check + read (warm cache)`, o.images, performance.now() - t)];
}

async function csvRow(root: string, o: DataBenchOptions): Promise<Row> {
  const file = path.join(root, 'data.csv');
  const header = [...Array.from({ length: 32 }, (_, k) => `f${k}`), 'label'].join(',');
  const lines = Array.from({ length: o.rows }, (_, i) =>
    [...Array.from({ length: 32 }, (_, k) => (((i * 31 + k * 7) % 1000) / 997).toFixed(4)), `c${i % 5}`].join(','),
  );
  writeFileSync(file, `${header}\n${lines.join('\n')}\n`);
  const t = performance.now();
  const ds = await readCsv({ kind: 'csv', file, labelColumn: 'label', label: 'class', stamp: csvStamp(file) });
  readAll(ds);
  return row('CSV, 32 features: parse + read', o.rows, performance.now() - t);
}

/** A tf.data map pipeline of `o.images` generated images, iterated batch by batch (each batch's values read out). */
async function tfDataRow(o: DataBenchOptions): Promise<Row> {
  const size = o.imageSize * o.imageSize * 3;
  const pipeline = tf.data
    .generator(function* () {
      for (let i = 0; i < o.images; i++) yield tf.tensor1d(new Float32Array(size).fill(i % 255));
    })
    .map(x => tf.tidy(() => (x as tf.Tensor).div(255)))
    .batch(o.batch);
  const t = performance.now();
  const it = await pipeline.iterator();
  for (let b = await it.next(); !b.done; b = await it.next()) {
    (b.value as tf.Tensor).dataSync();
    tf.dispose(b.value);
  }
  return row(`tf.data pipeline ${o.imageSize}x${o.imageSize}x3: generate, map, batch`, o.images, performance.now() - t);
}

/** Steps not counted in the steady share: the first ones wait for the loader threads to start. */
const WAIT_WARMUP_STEPS = 10;

async function trainRow(dir: string, model: string, o: DataBenchOptions): Promise<Row> {
  const steady: { waitMs: number; stepMs: number }[] = [];
  const s = await train(
    { model, data: dir, imageSize: [o.imageSize, o.imageSize, 3], devices: 2, batch: o.batch, steps: o.steps },
    { onStep: m => void (m.step > WAIT_WARMUP_STEPS && steady.push({ waitMs: m.dataWaitMs, stepMs: m.stepMs })) },
  );
  const sum = (k: 'waitMs' | 'stepMs') => steady.reduce((t, x) => t + x[k], 0);
  return row(`train ${model}, 2 devices, on the JPEG folder (warm)`, s.steps * o.batch, s.wallSeconds * 1000, {
    samplesPerSecond: s.samplesPerSecond,
    dataWaitShare: s.timings.loadWaitShare,
    steadyDataWaitShare: steady.length ? sum('waitMs') / sum('stepMs') : undefined,
  });
}

export async function runDataBench(o: DataBenchOptions): Promise<void> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'tandem-bench-data-'));
  try {
    const rows = [...(await folderRows(root, 'jpg', o)), ...(await folderRows(root, 'png', o)), await csvRow(root, o)];
    rows.push(await tfDataRow(o));
    for (const model of o.models) rows.push(await trainRow(path.join(root, 'jpg'), model, o));
    console.log(
      `\n${'what'.padEnd(58)} ${'samples'.padStart(8)} ${'samples/s'.padStart(10)} ${'data wait'.padStart(9)} ` +
        `${'steady'.padStart(7)}`,
    );
    const pct = (x: number | undefined) => (x === undefined ? '' : `${(100 * x).toFixed(1)}%`);
    for (const r of rows) {
      console.log(
        `${r.what.padEnd(58)} ${String(r.samples).padStart(8)} ${r.samplesPerSecond.toFixed(0).padStart(10)} ` +
          `${pct(r.dataWaitShare).padStart(9)} ${pct(r.steadyDataWaitShare).padStart(7)}`,
      );
    }
    mkdirSync(o.out, { recursive: true });
    const file = path.join(o.out, 'data.json');
    const { out, ...settings } = o;
    void out;
    writeFileSync(file, JSON.stringify({ ...runRecord(), settings, picture: [H, W], rows }, null, 2));
    console.log(`\nwrote ${file}`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
