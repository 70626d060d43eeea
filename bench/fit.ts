/**
 * `npm run bench -- fit [--steps N] [--batch B] [--runs R] [--models alexnet-mini]`: what `fit` costs over `train`.
 * The same builtin model (its factory, compiled with SGD and sparse categorical cross-entropy, as `train` trains it),
 * the same synthetic images, steps, batch, devices and backend, run by
 * - `train` (the config API the CLI runs), and
 * - `fit(model, x, y, args)` (one epoch of exactly `steps` batches, `shuffle: false`),
 * in turns, R rounds; and tfjs's own `model.fit` on one engine (the tfjs cpu backend, on the main thread: what a tfjs
 * user without tfjs-node has), fewer steps. Per run: the wall time of the call and the steady step (the median
 * interval between step ends after the warm-up: `train`'s onStep, `fit`'s and model.fit's onBatchEnd), as samples/s.
 * fit / train is the median over rounds of each round's ratio (a round's two runs are back to back: a slow spell of the
 * shared machine weighs on both); the medians of each are shown too. Beside it, the CPU time of every thread of the
 * process per steady step (from /proc): what each costs the machine, which slow spells barely move. Table and
 * bench/results/fit.json (--out).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import * as tf from '@tensorflow/tfjs';
import { fit, train } from '../src/index.js';
import { BUILTIN_MODELS } from '../src/model/builtin-models.js';
import { syntheticImages } from '../src/data/synthetic-images.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { runRecord } from './run-record.js';
import { processCpuMs } from './process-cpu.js';

export interface FitBenchOptions {
  models: string[];
  steps: number;
  batch: number;
  runs: number;
  /** tfjs's own model.fit's steps (it is slow on its cpu backend). */
  tfjsSteps: number;
  out: string;
}

interface Timed {
  wallS: number;
  /** Median ms between step ends after the warm-up. */
  stepMs: number;
  /**
   * CPU ms per step of every thread of this process (main, device, comm, loader) from the end of the warm-up to the
   * step before the last: what the run costs the machine, which a shared machine's slow spells barely move.
   */
  cpuPerStepMs: number;
}

/**
 * Step ends (`end()` after each step) and the process's CPU at the end of the warm-up and of the step before the
 * last (two /proc reads, on the main thread).
 */
function stepClock(steps: number) {
  const warm = warmOf(steps);
  const ends: number[] = [];
  const cpu: number[] = [];
  return {
    end(): void {
      ends.push(performance.now());
      if (ends.length === warm + 1 || ends.length === steps - 1) cpu.push(processCpuMs(process.pid) ?? NaN);
    },
    timed(wallS: number): Timed {
      const cpuPerStepMs = cpu.length === 2 ? (cpu[1] - cpu[0]) / (steps - 2 - warm) : NaN;
      return { wallS, stepMs: steadyMs(ends, warm), cpuPerStepMs };
    },
  };
}

const SEED = 7;
const CLASSES = 10;
const SHAPE = [32, 32, 3];

/** The median interval between successive times after `warm` of them. */
function steadyMs(ends: number[], warm: number): number {
  const gaps = ends.slice(warm + 1).map((t, i) => t - ends[warm + i]);
  const s = gaps.sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[s.length >> 1];
}

function data(samples: number): { x: tf.Tensor; y: tf.Tensor } {
  const ds = syntheticImages({ seed: SEED, classes: CLASSES, imageShape: SHAPE, size: samples });
  const per = SHAPE.reduce((a, b) => a * b, 1);
  const xs = new Float32Array(samples * per),
    ys = new Float32Array(samples);
  for (let i = 0; i < samples; i++) ys[i] = ds.read(i, xs, i * per);
  return { x: tf.tensor(xs, [samples, ...SHAPE]), y: tf.tensor(ys, [samples]) };
}

async function compiled(name: string): Promise<tf.LayersModel> {
  const logits = await BUILTIN_MODELS[name].factory(tf, { inputShape: SHAPE, classes: CLASSES, seed: SEED });
  // train reads the builtin's logits with softmax cross-entropy; a tfjs user ends the model in a softmax
  const output = tf.layers.activation({ activation: 'softmax' }).apply(logits.outputs[0]) as tf.SymbolicTensor;
  const model = tf.model({ inputs: logits.inputs, outputs: output });
  model.compile({ optimizer: tf.train.sgd(0.01), loss: 'sparseCategoricalCrossentropy', metrics: ['acc'] });
  return model;
}

const warmOf = (steps: number) => Math.min(3, Math.floor(steps / 5));

async function timeTrain(name: string, o: FitBenchOptions, devices: number, backend: string): Promise<Timed> {
  const clock = stepClock(o.steps);
  const t0 = performance.now();
  await train(
    {
      model: name,
      data: 'synthetic-images',
      datasetSize: o.steps * o.batch,
      classes: CLASSES,
      imageSize: SHAPE,
      steps: o.steps,
      batch: o.batch,
      devices,
      backend: backend as 'native',
      optimizer: 'sgd',
      lr: 0.01,
      shuffle: false,
      seed: SEED,
    },
    { onStep: () => clock.end() },
  );
  return clock.timed((performance.now() - t0) / 1000);
}

async function timeFit(
  name: string,
  o: FitBenchOptions,
  xy: { x: tf.Tensor; y: tf.Tensor },
  tandem?: { devices: number; backend: string },
): Promise<Timed> {
  const model = await compiled(name);
  const clock = stepClock(Math.ceil(xy.x.shape[0] / o.batch));
  const callbacks = new tf.CustomCallback({ onBatchEnd: async () => clock.end() });
  const args = { epochs: 1, batchSize: o.batch, shuffle: false, verbose: 0 as const, callbacks };
  const t0 = performance.now();
  if (tandem) await fit(model, xy.x, xy.y, { ...args, devices: tandem.devices, backend: tandem.backend as 'native' });
  else await model.fit(xy.x, xy.y, args);
  const wallS = (performance.now() - t0) / 1000;
  model.dispose();
  return clock.timed(wallS);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

interface FitRow {
  model: string;
  backend: string;
  devices: number;
  trainStepMs: number;
  fitStepMs: number;
  /** fit / train, steady step: the median over rounds of each round's ratio. */
  stepRatio: number;
  /** fit / train of the median steps (trainStepMs, fitStepMs). */
  medianRatio: number;
  /** CPU ms per steady step of every thread, median over rounds (Timed.cpuPerStepMs), and fit / train of them. */
  trainCpuPerStepMs: number;
  fitCpuPerStepMs: number;
  cpuRatio: number;
  trainWallS: number;
  fitWallS: number;
  wallRatio: number;
  samplesPerSecondTrain: number;
  samplesPerSecondFit: number;
  rounds: { train: Timed; fit: Timed }[];
}

async function rowsOf(name: string, o: FitBenchOptions, backend: string): Promise<FitRow[]> {
  const xy = data(o.steps * o.batch);
  const rows: FitRow[] = [];
  for (const devices of [1, 2]) {
    const rounds: { train: Timed; fit: Timed }[] = [];
    for (let r = 0; r < o.runs; r++) {
      const runTrain = () => timeTrain(name, o, devices, backend),
        runFit = () => timeFit(name, o, xy, { devices, backend });
      if (r % 2 === 0) {
        const trained = await runTrain();
        rounds.push({ train: trained, fit: await runFit() });
      } else {
        const fitted = await runFit();
        rounds.push({ train: await runTrain(), fit: fitted });
      }
    }
    const trainStepMs = median(rounds.map(r => r.train.stepMs)),
      fitStepMs = median(rounds.map(r => r.fit.stepMs));
    const stepRatio = median(rounds.map(r => r.fit.stepMs / r.train.stepMs));
    const trainCpuPerStepMs = median(rounds.map(r => r.train.cpuPerStepMs)),
      fitCpuPerStepMs = median(rounds.map(r => r.fit.cpuPerStepMs));
    const trainWallS = median(rounds.map(r => r.train.wallS)),
      fitWallS = median(rounds.map(r => r.fit.wallS));
    rows.push({
      ...{ model: name, backend, devices, trainStepMs, fitStepMs, stepRatio, medianRatio: fitStepMs / trainStepMs },
      ...{ trainWallS, fitWallS, wallRatio: fitWallS / trainWallS },
      ...{ trainCpuPerStepMs, fitCpuPerStepMs, cpuRatio: fitCpuPerStepMs / trainCpuPerStepMs },
      samplesPerSecondTrain: o.batch / (trainStepMs / 1000),
      samplesPerSecondFit: o.batch / (fitStepMs / 1000),
      rounds,
    });
    console.log(
      `${name} ${backend} ${devices} device(s): step train ${trainStepMs.toFixed(1)} ms, fit ` +
        `${fitStepMs.toFixed(1)} ms (fit / train ${stepRatio.toFixed(3)} per round, ` +
        `${(fitStepMs / trainStepMs).toFixed(3)} of the medians); wall ` +
        `${trainWallS.toFixed(2)} s, ${fitWallS.toFixed(2)} s; CPU per step (every thread) ` +
        `${trainCpuPerStepMs.toFixed(1)}, ${fitCpuPerStepMs.toFixed(1)} ms`,
    );
  }
  xy.x.dispose();
  xy.y.dispose();
  return rows;
}

export async function runFitBench(o: FitBenchOptions): Promise<void> {
  await tf.setBackend('cpu');
  const backend = loadNativeAddon().loaded ? 'native' : 'cpu';
  console.log(
    `fit bench: ${o.models.join(', ')}, batch ${o.batch}, ${o.steps} steps, ${o.runs} rounds in turns, tandem ` +
      `backend ${backend}; tfjs's model.fit on its cpu backend, ${o.tfjsSteps} steps`,
  );
  const rows: FitRow[] = [];
  const tfjs: { model: string; stepMs: number; wallS: number; samplesPerSecond: number }[] = [];
  for (const name of o.models) {
    rows.push(...(await rowsOf(name, o, backend)));
    const small = data(o.tfjsSteps * o.batch);
    const t = await timeFit(name, o, small);
    tfjs.push({ model: name, ...t, samplesPerSecond: o.batch / (t.stepMs / 1000) });
    console.log(`${name}: tfjs model.fit (cpu backend) step ${t.stepMs.toFixed(1)} ms`);
  }
  printFitTables(rows, tfjs);
  mkdirSync(o.out, { recursive: true });
  const file = `${o.out}/fit.json`;
  writeFileSync(
    file,
    JSON.stringify({ bench: 'fit', date: new Date().toISOString(), ...runRecord(), options: o, rows, tfjs }, null, 2) +
      '\n',
  );
  console.log(`\nJSON: ${file}`);
}

function printFitTables(rows: FitRow[], tfjs: { model: string; stepMs: number; samplesPerSecond: number }[]): void {
  console.log(
    '\nSteady step (median interval between step ends after the warm-up), median over rounds; fit / train: the ' +
      "median of the rounds' ratios:\n",
  );
  console.log(
    '| model | backend | devices | train ms | fit ms | fit / train | train samples/s | fit samples/s | wall fit / ' +
      'train | CPU ms/step train | fit | fit / train |',
  );
  console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows)
    console.log(
      `| ${r.model} | ${r.backend} | ${r.devices} | ${r.trainStepMs.toFixed(1)} | ${r.fitStepMs.toFixed(1)} | ` +
        `${r.stepRatio.toFixed(3)} | ${r.samplesPerSecondTrain.toFixed(0)} | ${r.samplesPerSecondFit.toFixed(0)} | ` +
        `${r.wallRatio.toFixed(3)} | ${r.trainCpuPerStepMs.toFixed(1)} | ${r.fitCpuPerStepMs.toFixed(1)} | ` +
        `${r.cpuRatio.toFixed(3)} |`,
    );
  console.log("\ntfjs's own model.fit, one engine (tfjs cpu backend, main thread), against tandem's fit:\n");
  console.log(
    '| model | model.fit ms | model.fit samples/s | tandem fit 1 device samples/s | × | tandem fit 2 devices ' +
      'samples/s | × |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const t of tfjs) {
    const one = rows.find(r => r.model === t.model && r.devices === 1),
      two = rows.find(r => r.model === t.model && r.devices === 2);
    console.log(
      `| ${t.model} | ${t.stepMs.toFixed(1)} | ${t.samplesPerSecond.toFixed(0)} | ` +
        (`${one?.samplesPerSecondFit.toFixed(0)} | ` +
          `${one ? (one.samplesPerSecondFit / t.samplesPerSecond).toFixed(1) : ''} | `) +
        (`${two?.samplesPerSecondFit.toFixed(0)} | ` +
          `${two ? (two.samplesPerSecondFit / t.samplesPerSecond).toFixed(1) : ''} |`),
    );
  }
}
