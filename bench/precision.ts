/**
 * `npm run bench -- precision [--models a,b] [--steps N] [--batch N] [--repeats N]`: tandem's native engine in fp32
 * and bf16 on 1 and 2 devices, beside PyTorch fp32 and `torch.autocast('cpu', dtype=torch.bfloat16)` (both
 * channels_last, one thread, one process) in the same run, on the same architectures (bench/torch/<model>.py) and
 * batch per device. The headline, 1 device bf16 against autocast, is `--repeats` (default 3) rounds run in turn,
 * reported as medians and the median of the rounds' ratios: the machine's speed drifts between runs. Each round runs
 * PyTorch twice, with glibc's malloc as it comes and keeping freed memory (bench/torch-reference.ts, `TorchAllocator`):
 * on a machine whose page faults are slow the first pays hundreds of faults a step that the second does not, and the
 * goal's ratio is taken against the faster of the two. Minor page faults per timed step are printed for both sides.
 *
 * tandem trains on 512 synthetic images, drawn once and then kept by each device's reader, so that neither side
 * pays for making data in its step (PyTorch's reference trains on one fixed random batch).
 *
 * Both sides are timed over the second half of `--steps` (default 300), the first half untimed: tandem's step keeps
 * shortening for its first ~100 steps (V8 optimises the JS around the kernels, and the kernels' wrappers with it:
 * alexnet-mini bf16's forward and backward 8.6 ms in steps 20–40, 7.0 ms after step 200), where PyTorch's is steady
 * after a few. tandem's time is device 0's, from the start of its first timed step to the start of its last.
 *
 * For each model it also prints what oneDNN picked per kernel in bf16 (its implementation strings), the split of
 * one device's step into native kernels (oneDNN convolutions and matmuls, C++ pooling and elementwise loops) and
 * everything else (stock tfjs kernels, JS dispatch, the tape, the update), measured on the bench's own thread, and
 * the share of this machine's measured bf16 matmul peak the bf16 step reaches (training FLOPs / step time), and,
 * beside 2 devices' speed-up over one (c)/(b), the machine's ceiling for it (d)/(b): two independent 1-device bf16
 * trainings at once, as the scaling bench's (d).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import * as tf from '@tensorflow/tfjs';
import { startTraining, type TrainConfig } from '../src/index.js';
import { startBackend } from '../src/engine/backend.js';
import { requireNativeAddon, type NativeAddon } from '../src/engine/native/native-addon.js';
import { bf16Support } from '../src/engine/native/bf16-support.js';
import { getEngine } from '../src/engine/engine-registry.js';
import { BUILTIN_MODELS } from '../src/model/builtin-models.js';
import { trainBatchNormalization } from '../src/model/sync-batch-norm.js';
import { runRecord } from './run-record.js';
import { allowedCpus, pinTo } from './cpu-pin.js';
import { findTorchPython, runTorchReference, type TorchAllocator, type TorchModel } from './torch-reference.js';
import { readThreadCpu, threadCpuPerStep, type ThreadCpu, type ThreadReading } from './thread-cpu.js';
import { matmulPeak, stepSplit, trainingFlopsPerSample, type StepSplit } from './precision-probes.js';
import { median, printTables, printThreadSplit } from './precision-tables.js';
import type { Bf16Runs, ModelProbe, Precision, PrecisionRow } from './precision-tables.js';

export interface PrecisionBenchOptions {
  models: string[];
  steps: number;
  perDeviceBatch: number;
  /** The 1-device bf16 comparison, tandem then PyTorch both ways, this many times in turn: medians, median ratios. */
  repeats: number;
  /**
   * Run each round on one CPU (the rounds on the CPUs in turn): one core each. Unpinned, tandem's comm thread (the
   * update, the bf16 copy of the parameters) runs beside its compute thread on the other core.
   */
  pin: boolean;
  out: string;
}

/** Each model's input on both sides of the precision benches (MNIST's for mnist-node, CIFAR's for the others). */
export const INPUT: Record<string, [number, number, number]> = {
  'alexnet-mini': [32, 32, 3],
  'resnet-mini': [32, 32, 3],
  'mobilenet-mini': [32, 32, 3],
  'mnist-node': [28, 28, 1],
};

/** samples/s over the timed steps, and (Linux) the CPU each kind of thread spent per timed step. */
async function tandemRun(
  model: string,
  devices: number,
  precision: Precision,
  o: PrecisionBenchOptions,
  /** Switches turned off for this run: the replay, the update on the compute thread, the main thread's loading. */
  off: ('TANDEM_STEP_REPLAY' | 'TANDEM_UPDATE_ON_COMPUTE' | 'mainThreadLoads')[] = [],
) {
  const cfg: TrainConfig = {
    model,
    data: 'synthetic-images',
    imageSize: INPUT[model],
    datasetSize: 512, // drawn once, then kept by the reader (PyTorch's reference trains on one fixed batch)
    classes: 10,
    devices,
    batch: devices * o.perDeviceBatch,
    steps: o.steps,
    backend: 'native',
    nativeThreads: 1,
    precision,
    optimizer: 'sgd',
    lr: 0.01,
    momentum: 0.9,
    ...(off.includes('mainThreadLoads') ? { loaderThreads: 1 } : {}),
  };
  const warm = untimedSteps(o.steps);
  const starts: number[] = [];
  const cpu: (ThreadReading | undefined)[] = [];
  const faults: number[] = [];
  for (const name of off) if (name !== 'mainThreadLoads') process.env[name] = 'off'; // the threads read it at start
  const run = startTraining(cfg);
  run.timeline$.subscribe(s => {
    if (s.device !== 0 || s.thread !== 'compute' || s.kind !== 'load' || s.step <= warm) return;
    starts[s.step] = s.start;
    if (s.step !== warm + 1 && s.step !== o.steps) return;
    cpu.push(readThreadCpu());
    faults.push(process.resourceUsage().minorPageFault);
  });
  const { replayedSteps } = await run.done.finally(() => off.forEach(name => delete process.env[name]));
  const timed = starts.filter(t => t !== undefined);
  if (timed.length < 2) throw new Error(`precision bench: ${model} reported ${timed.length} timed steps`);
  const rate = (cfg.batch! * (timed.length - 1)) / ((timed[timed.length - 1] - timed[0]) / 1000);
  const [a, b] = cpu;
  const faultsPerStep = (faults[1] - faults[0]) / (timed.length - 1);
  return { rate, threads: a && b ? threadCpuPerStep(a, b, timed.length - 1) : undefined, faultsPerStep, replayedSteps };
}

/** The untimed first steps of a run of `steps`, on both sides: half. */
function untimedSteps(steps: number): number {
  return Math.floor(steps / 2);
}

/** (d): two independent 1-device trainings (the same config) at the same time, their rates summed. */
async function independentRate(model: string, precision: Precision, o: PrecisionBenchOptions) {
  const runs = await Promise.all([0, 1].map(() => tandemRun(model, 1, precision, o)));
  return runs[0].rate + runs[1].rate;
}

/** PyTorch's samples/s and minor page faults per timed step, with glibc's malloc as `allocator` says. */
async function torchRun(
  python: string,
  model: string,
  precision: Precision,
  allocator: TorchAllocator,
  o: PrecisionBenchOptions,
) {
  const warmup = untimedSteps(o.steps);
  const common = {
    mode: 'single' as const,
    model: model as TorchModel,
    batch: o.perDeviceBatch,
    warmup,
    steps: o.steps - warmup,
    threads: 1,
    channelsLast: true,
  };
  const r = await runTorchReference(python, { ...common, precision, allocator });
  return { rate: r.samplesPerSecond, faultsPerStep: r.minorFaultsPerStep ?? 0 };
}

async function torchRates(python: string, model: string, o: PrecisionBenchOptions, bf16: Bf16Runs) {
  const fp32 = async (allocator: TorchAllocator) => (await torchRun(python, model, 'fp32', allocator, o)).rate;
  return {
    glibc: { fp32: await fp32('glibc'), bf16: median(bf16.torch) },
    kept: { fp32: await fp32('kept'), bf16: median(bf16.torchKept) },
  };
}

/**
 * The headline comparison, 1 device bf16 against PyTorch's autocast, as `repeats` rounds run in turn (tandem, then
 * PyTorch with glibc's malloc as it comes, then PyTorch keeping freed memory): this machine's speed drifts by 5–20%
 * over minutes, so a ratio of two runs minutes apart says as much about the drift. With `pin`, each round runs on one
 * CPU (bench/cpu-pin.ts), the rounds on the CPUs in turn.
 */
async function bf16Rounds(python: string, model: string, o: PrecisionBenchOptions) {
  const runs: Bf16Runs = {
    ...{ tandem: [], tandemLive: [], tandemReplayed: [], tandemCommUpdate: [], tandemLoaderThread: [] },
    ...{ torch: [], torchKept: [], cpus: [] },
    ...{ tandemFaults: [], torchFaults: [], torchKeptFaults: [] },
  };
  const threads: ThreadCpu[] = [];
  const cpus = o.pin ? allowedCpus() : undefined;
  if (o.pin && !cpus) throw new Error('precision bench: --pin needs taskset (util-linux)');
  for (let i = 0; i < o.repeats; i++) {
    const cpu = cpus?.[i % cpus.length];
    if (cpu !== undefined) pinTo([cpu]);
    try {
      const run = await tandemRun(model, 1, 'bf16', o);
      runs.tandem.push(run.rate);
      runs.tandemFaults.push(run.faultsPerStep);
      runs.tandemReplayed.push(run.replayedSteps);
      if (run.threads) threads.push(run.threads);
      runs.tandemLive.push((await tandemRun(model, 1, 'bf16', o, ['TANDEM_STEP_REPLAY'])).rate);
      if (cpu !== undefined) {
        runs.tandemCommUpdate!.push((await tandemRun(model, 1, 'bf16', o, ['TANDEM_UPDATE_ON_COMPUTE'])).rate);
        runs.tandemLoaderThread!.push((await tandemRun(model, 1, 'bf16', o, ['mainThreadLoads'])).rate);
      }
      const glibc = await torchRun(python, model, 'bf16', 'glibc', o);
      runs.torch.push(glibc.rate);
      runs.torchFaults.push(glibc.faultsPerStep);
      const kept = await torchRun(python, model, 'bf16', 'kept', o);
      runs.torchKept.push(kept.rate);
      runs.torchKeptFaults.push(kept.faultsPerStep);
    } finally {
      if (cpus) pinTo(cpus);
    }
    if (cpu !== undefined) runs.cpus.push(cpu);
  }
  const over = (torch: number[]) => median(runs.tandem.map((t, i) => t / torch[i]));
  const faster = runs.torch.map((t, i) => Math.max(t, runs.torchKept[i]));
  const ratios = { glibc: over(runs.torch), kept: over(runs.torchKept), faster: over(faster) };
  return { runs, threads, ratios };
}

/** The model built on this thread: its training FLOPs per sample, bf16 implementations and step splits. */
async function probeModel(addon: NativeAddon, model: string, o: PrecisionBenchOptions) {
  const built = await BUILTIN_MODELS[model].factory(tf, { inputShape: INPUT[model], classes: 10, seed: 1 });
  const flops = trainingFlopsPerSample(built);
  getEngine('native').prepareModel?.(tf, built, { nativeFusion: true }); // once, as a device trains it
  trainBatchNormalization(tf, built); // BatchNormalization on tandem's loops, as a device trains it
  const split: Record<Precision, StepSplit> = {
    fp32: stepSplit(addon, built, o.perDeviceBatch, 'fp32', untimedSteps(o.steps)),
    bf16: stepSplit(addon, built, o.perDeviceBatch, 'bf16', untimedSteps(o.steps)),
  };
  built.dispose();
  return { flops, split };
}

export async function runPrecisionBench(o: PrecisionBenchOptions): Promise<void> {
  const addon = requireNativeAddon();
  const support = bf16Support(addon);
  if (support.refusal) throw new Error(`precision bench: ${support.refusal}`);
  await startBackend(tf, 'native', { nativeThreads: 1 });
  const peak = matmulPeak(addon);
  console.log(`CPU ${support.cpu}: ${support.flags.join(', ')}; oneDNN ${support.isa}, bf16 matmul on`);
  console.log(`${support.implementation}; measured peak (512³, 1 thread): fp32 ${peak.fp32.toFixed(0)}, bf16 `);
  console.log(`${peak.bf16.toFixed(0)} GFLOP/s\n`);
  const python = findTorchPython();
  const rows: PrecisionRow[] = [];
  const probes: Record<string, ModelProbe> = {};
  for (const model of o.models) {
    probes[model] = await probeModel(addon, model, o);
    const rounds = python ? await bf16Rounds(python, model, o) : undefined;
    const torch = python && rounds ? await torchRates(python, model, o, rounds.runs) : undefined;
    for (const devices of [1, 2]) {
      const one = devices === 1 ? rounds : undefined;
      const tandem = {
        fp32: (await tandemRun(model, devices, 'fp32', o)).rate,
        bf16: one ? median(one.runs.tandem) : (await tandemRun(model, devices, 'bf16', o)).rate,
      };
      const bf16Independent = devices === 2 ? await independentRate(model, 'bf16', o) : undefined;
      rows.push({
        model,
        devices,
        tandem,
        torch: one ? torch : undefined,
        ...(one
          ? {
              bf16OverTorchBf16: one.ratios.glibc,
              bf16OverTorchBf16Kept: one.ratios.kept,
              bf16OverFasterTorch: one.ratios.faster,
              bf16Runs: one.runs,
              bf16Threads: one.threads,
            }
          : {}),
        bf16PeakShare: (tandem.bf16 * probes[model].flops) / (devices * peak.bf16 * 1e9),
        ...(bf16Independent === undefined ? {} : { bf16Independent }),
      });
    }
  }
  printTables(rows, probes);
  printThreadSplit(rows, o.pin, o.perDeviceBatch);
  const onednn = { isa: support.isa, bf16Matmul: support.implementation };
  const result = {
    bench: 'precision',
    date: new Date().toISOString(),
    ...runRecord(),
    onednn,
    peak,
    options: o,
    rows,
    probes,
  };
  mkdirSync(o.out, { recursive: true });
  const file = `${o.out}/precision.json`;
  writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
  console.log(`\nwrote ${file}`);
}
