/**
 * `npm run bench -- models`: samples/s of the BatchNormalization models —
 * resnet-mini (ResNet-style, functional) and mobilenet-mini (depthwise-
 * separable) — on 1 and 2 devices, native and wasm, and on 2 devices what
 * synchronised BatchNormalization (the default: global-batch statistics, a
 * collective in forward and backward) costs beside local statistics.
 *
 * Beside them, in the same run, PyTorch on the same architecture
 * (bench/torch/<model>.py) when `python3 -c "import torch"` works: one process,
 * then DDP over gloo on 2 processes with synchronised BatchNormalization
 * (bench/torch/sync_batch_norm.py) and with DDP's own local statistics. The
 * bench checks that both sides count the same trainable and non-trainable
 * parameters, and fails if they do not.
 *
 * Both sides are measured alike: the first `warmupSteps(steps)` steps untimed,
 * then the mean step time (the timed steps' wall time over their count), one
 * run each; the same global batch, the same threads per device / process.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { train, type BackendName, type TrainConfig } from '../src/index.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { warmupSteps } from '../src/trainer/run-summary.js';
import { findTorchPython, runTorchReference, type TorchModel, type TorchStepResult } from './torch-reference.js';

export interface ModelsBenchOptions {
  steps: number;
  perDeviceBatch: number;
  out: string;
}

const MODELS = ['resnet-mini', 'mobilenet-mini'] as const satisfies readonly TorchModel[];
/** tandem: OpenMP threads per native device (a wasm device runs one); PyTorch: torch threads per process. */
const DEVICE_THREADS = 1;

interface Rate {
  samplesPerSecond: number;
  stepMs: number;
}
interface ParameterCounts {
  trainable: number;
  nonTrainable: number;
}
type Column = 'oneDevice' | 'twoDevicesSync' | 'twoDevicesLocal';
const COLUMNS: readonly Column[] = ['oneDevice', 'twoDevicesSync', 'twoDevicesLocal'];

interface ModelsRow {
  model: string;
  /** 'native', 'wasm', or the PyTorch version. */
  run: string;
  oneDevice: Rate;
  twoDevicesSync: Rate;
  twoDevicesLocal: Rate;
  /** Step time of sync over local BatchNormalization on 2 devices. */
  syncOverLocal: number;
  parameters: ParameterCounts;
}

function rowOf(model: string, run: string, parameters: ParameterCounts, one: Rate, sync: Rate, local: Rate): ModelsRow {
  return {
    model,
    run,
    oneDevice: one,
    twoDevicesSync: sync,
    twoDevicesLocal: local,
    syncOverLocal: sync.stepMs / local.stepMs,
    parameters,
  };
}

async function tandemRow(model: TorchModel, backend: BackendName, opts: ModelsBenchOptions): Promise<ModelsRow> {
  let parameters: ParameterCounts | undefined;
  const run = async (devices: number, batchNorm: 'sync' | 'local'): Promise<Rate> => {
    const cfg: TrainConfig = {
      model,
      data: 'synthetic-images',
      imageSize: [32, 32, 3],
      datasetSize: 4096,
      classes: 10,
      devices,
      batchNorm,
      batch: devices * opts.perDeviceBatch,
      steps: opts.steps,
      backend,
      ...(backend === 'native' ? { nativeThreads: DEVICE_THREADS } : {}),
      optimizer: 'sgd',
      lr: 0.01,
    };
    const s = await train(cfg);
    parameters ??= {
      trainable: s.parameters,
      nonTrainable: s.nonTrainableWeights.reduce((n, w) => n + w.values.length, 0),
    };
    return { samplesPerSecond: cfg.batch! / (s.steadyStepMs / 1000), stepMs: s.steadyStepMs };
  };
  const one = await run(1, 'sync');
  const sync = await run(2, 'sync');
  const local = await run(2, 'local');
  return rowOf(model, backend, parameters!, one, sync, local);
}

async function torchRow(python: string, model: TorchModel, opts: ModelsBenchOptions): Promise<ModelsRow> {
  const warmup = warmupSteps(opts.steps);
  const common = { model, batch: opts.perDeviceBatch, warmup, steps: opts.steps - warmup, threads: DEVICE_THREADS };
  const rate = (r: TorchStepResult): Rate => ({ samplesPerSecond: r.samplesPerSecond, stepMs: r.msPerStep });
  const one = await runTorchReference(python, { ...common, mode: 'single' });
  const sync = await runTorchReference(python, { ...common, mode: 'ddp', procs: 2, batchNorm: 'sync' });
  const local = await runTorchReference(python, { ...common, mode: 'ddp', procs: 2, batchNorm: 'local' });
  const parameters = { trainable: one.trainableParameters, nonTrainable: one.nonTrainableParameters };
  return rowOf(model, `PyTorch ${one.torch}`, parameters, rate(one), rate(sync), rate(local));
}

/** Prints both sides' parameter counts; throws when they differ (then the architectures do). */
function checkSameParameters(model: string, tandem: ParameterCounts, torch: ParameterCounts): void {
  const same = tandem.trainable === torch.trainable && tandem.nonTrainable === torch.nonTrainable;
  console.log(
    `${model} parameters: tandem ${tandem.trainable} trainable + ${tandem.nonTrainable} non-trainable, ` +
      `PyTorch ${torch.trainable} + ${torch.nonTrainable}: ${same ? 'the same' : 'DIFFERENT'}`,
  );
  if (!same) throw new Error(`models bench: bench/torch's ${model} is not tandem's (parameter counts differ)`);
}

function printTable(rows: ModelsRow[]): void {
  console.log(
    '\n| model | run | 1 device samples/s | 2 devices (sync BN) samples/s | 2 devices (local BN) samples/s | sync / ' +
      'local step time |',
  );
  console.log('|---|---|---:|---:|---:|---:|');
  for (const r of rows) {
    const rates = COLUMNS.map(k => r[k].samplesPerSecond.toFixed(0));
    console.log(`| ${r.model} | ${r.run} | ${rates.join(' | ')} | ${r.syncOverLocal.toFixed(2)} |`);
  }
}

/** PyTorch's samples/s over tandem's, for each model, tandem backend and column. */
interface TorchOverTandem {
  model: string;
  backend: string;
  oneDevice: number;
  twoDevicesSync: number;
  twoDevicesLocal: number;
}

function torchOverTandem(rows: ModelsRow[]): TorchOverTandem[] {
  const ratios: TorchOverTandem[] = [];
  for (const torch of rows.filter(r => r.run.startsWith('PyTorch'))) {
    for (const tandem of rows.filter(r => r.model === torch.model && r !== torch)) {
      const [oneDevice, twoDevicesSync, twoDevicesLocal] = COLUMNS.map(
        k => torch[k].samplesPerSecond / tandem[k].samplesPerSecond,
      );
      ratios.push({ model: torch.model, backend: tandem.run, oneDevice, twoDevicesSync, twoDevicesLocal });
    }
  }
  return ratios;
}

function printRatios(ratios: TorchOverTandem[]): void {
  if (ratios.length === 0) return;
  console.log('\nPyTorch samples/s / tandem samples/s (same run):\n');
  console.log('| model | tandem backend | 1 device | 2 devices (sync BN) | 2 devices (local BN) |');
  console.log('|---|---|---:|---:|---:|');
  for (const r of ratios)
    console.log(`| ${r.model} | ${r.backend} | ${COLUMNS.map(k => r[k].toFixed(1)).join(' | ')} |`);
}

export async function runModelsBench(opts: ModelsBenchOptions): Promise<void> {
  const backends: BackendName[] = loadNativeAddon().loaded ? ['native', 'wasm'] : ['wasm'];
  const python = findTorchPython();
  console.log(
    `models bench: ${MODELS.join(', ')} on 32x32x3 synthetic images, ${opts.perDeviceBatch} samples per device per ` +
      `step, ` +
      (`${opts.steps} steps (${warmupSteps(opts.steps)} untimed), sgd, ${DEVICE_THREADS} thread per device; backends ` +
        `${backends.join(', ')}; `) +
      `${os.availableParallelism()} cores.`,
  );
  if (python === undefined)
    console.log('(no PyTorch rows: `python3 -c "import torch"` fails here; Debian: apt-get install python3-torch)');
  const rows: ModelsRow[] = [];
  for (const model of MODELS) {
    for (const backend of backends) rows.push(await tandemRow(model, backend, opts));
    if (python !== undefined) {
      const torch = await torchRow(python, model, opts);
      checkSameParameters(model, rows.at(-1)!.parameters, torch.parameters);
      rows.push(torch);
    }
  }
  printTable(rows);
  const ratios = torchOverTandem(rows);
  printRatios(ratios);
  mkdirSync(opts.out, { recursive: true });
  writeFileSync(
    `${opts.out}/models.json`,
    JSON.stringify(
      {
        bench: 'models',
        date: new Date().toISOString(),
        cores: os.availableParallelism(),
        options: { ...opts, warmup: warmupSteps(opts.steps), threadsPerDevice: DEVICE_THREADS },
        rows,
        torchOverTandem: ratios,
      },
      null,
      2,
    ),
  );
  console.log(`\nJSON: ${opts.out}/models.json`);
}
