/**
 * `npm run bench -- precision [--models a,b] [--steps N] [--batch N] [--repeats N]`: tandem's native engine in fp32
 * and bf16 on 1 and 2 devices, beside PyTorch fp32 and `torch.autocast('cpu', dtype=torch.bfloat16)` (both
 * channels_last, one thread, one process) in the same run, on the same architectures (bench/torch/<model>.py) and
 * batch per device. The headline, 1 device bf16 against autocast, is `--repeats` (default 3) pairs run in turn,
 * reported as medians and the median of the pairs' ratios: the machine's speed drifts between runs.
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
import { findTorchPython, runTorchReference, type TorchModel } from './torch-reference.js';
import { readThreadCpu, threadCpuPerStep, THREAD_GROUPS, type ThreadCpu, type ThreadReading } from './thread-cpu.js';
import { matmulPeak, stepSplit, trainingFlopsPerSample, type StepSplit } from './precision-probes.js';

export interface PrecisionBenchOptions {
  models: string[];
  steps: number;
  perDeviceBatch: number;
  /** The 1-device bf16 comparison, tandem then PyTorch, this many times in turn: medians and the median ratio. */
  repeats: number;
  /**
   * Run each pair on one CPU (the pairs on the CPUs in turn): one core each. Unpinned, tandem's comm thread (the
   * update, the bf16 copy of the parameters) runs beside its compute thread on the other core.
   */
  pin: boolean;
  out: string;
}

type Precision = 'fp32' | 'bf16';

interface PrecisionRow {
  model: string;
  devices: number;
  tandem: Record<Precision, number>;
  torch?: Record<Precision, number>;
  /** The median of the alternated pairs' tandem bf16 / PyTorch bf16 (1 device). */
  bf16OverTorchBf16?: number;
  /**
   * 1 device: each pair's samples/s, in the order run (tandem bf16 first, then PyTorch bf16), and the CPU each pair
   * ran on (`pin`; empty unpinned).
   */
  bf16Pairs?: { tandem: number[]; torch: number[]; cpus: number[] };
  /**
   * 1 device bf16: each tandem run of the pairs, ms of CPU per step by thread (bench/thread-cpu.ts); with `pin`, all
   * on one core, so they add up to the step.
   */
  bf16Threads?: ThreadCpu[];
  bf16PeakShare: number;
  /** 2-device rows: two independent 1-device bf16 trainings at once, rates summed (the machine's ceiling, (d)). */
  bf16Independent?: number;
}

const INPUT: Record<string, [number, number, number]> = {
  'alexnet-mini': [32, 32, 3],
  'resnet-mini': [32, 32, 3],
  'mobilenet-mini': [32, 32, 3],
  'mnist-node': [28, 28, 1],
};

/** samples/s over the timed steps, and (Linux) the CPU each kind of thread spent per timed step. */
async function tandemRun(model: string, devices: number, precision: Precision, o: PrecisionBenchOptions) {
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
  };
  const warm = untimedSteps(o.steps);
  const starts: number[] = [];
  const cpu: (ThreadReading | undefined)[] = [];
  const run = startTraining(cfg);
  run.timeline$.subscribe(s => {
    if (s.device !== 0 || s.thread !== 'compute' || s.kind !== 'load' || s.step <= warm) return;
    starts[s.step] = s.start;
    if (s.step === warm + 1 || s.step === o.steps) cpu.push(readThreadCpu());
  });
  await run.done;
  const timed = starts.filter(t => t !== undefined);
  if (timed.length < 2) throw new Error(`precision bench: ${model} reported ${timed.length} timed steps`);
  const rate = (cfg.batch! * (timed.length - 1)) / ((timed[timed.length - 1] - timed[0]) / 1000);
  const [a, b] = cpu;
  return { rate, threads: a && b ? threadCpuPerStep(a, b, timed.length - 1) : undefined };
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

async function torchRate(python: string, model: string, precision: Precision, o: PrecisionBenchOptions) {
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
  return (await runTorchReference(python, { ...common, precision })).samplesPerSecond;
}

/**
 * The headline comparison, 1 device bf16 against PyTorch's autocast, as `repeats` pairs run in turn: this machine's
 * speed drifts by 5–20% over minutes, so a ratio of two runs minutes apart says as much about the drift. With `pin`,
 * each pair runs on one CPU (bench/cpu-pin.ts), the pairs on the CPUs in turn.
 */
async function bf16Pairs(python: string, model: string, o: PrecisionBenchOptions) {
  const pairs = { tandem: [] as number[], torch: [] as number[], cpus: [] as number[], threads: [] as ThreadCpu[] };
  const cpus = o.pin ? allowedCpus() : undefined;
  if (o.pin && !cpus) throw new Error('precision bench: --pin needs taskset (util-linux)');
  for (let i = 0; i < o.repeats; i++) {
    const cpu = cpus?.[i % cpus.length];
    if (cpu !== undefined) pinTo([cpu]);
    try {
      const run = await tandemRun(model, 1, 'bf16', o);
      pairs.tandem.push(run.rate);
      if (run.threads) pairs.threads.push(run.threads);
      pairs.torch.push(await torchRate(python, model, 'bf16', o));
    } finally {
      if (cpus) pinTo(cpus);
    }
    if (cpu !== undefined) pairs.cpus.push(cpu);
  }
  return { ...pairs, ratio: median(pairs.tandem.map((t, i) => t / pairs.torch[i])) };
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
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
  const probes: Record<string, Awaited<ReturnType<typeof probeModel>>> = {};
  for (const model of o.models) {
    probes[model] = await probeModel(addon, model, o);
    const torchFp32 = python ? await torchRate(python, model, 'fp32', o) : undefined;
    const pairs = python ? await bf16Pairs(python, model, o) : undefined;
    for (const devices of [1, 2]) {
      const paired = devices === 1 ? pairs : undefined;
      const tandem = {
        fp32: (await tandemRun(model, devices, 'fp32', o)).rate,
        bf16: paired ? median(paired.tandem) : (await tandemRun(model, devices, 'bf16', o)).rate,
      };
      const torchRow = paired && torchFp32 !== undefined ? { fp32: torchFp32, bf16: median(paired.torch) } : undefined;
      const bf16Independent = devices === 2 ? await independentRate(model, 'bf16', o) : undefined;
      rows.push({
        model,
        devices,
        tandem,
        torch: torchRow,
        ...(paired
          ? {
              bf16OverTorchBf16: paired.ratio,
              bf16Pairs: { tandem: paired.tandem, torch: paired.torch, cpus: paired.cpus },
              bf16Threads: paired.threads,
            }
          : {}),
        bf16PeakShare: (tandem.bf16 * probes[model].flops) / (devices * peak.bf16 * 1e9),
        ...(bf16Independent === undefined ? {} : { bf16Independent }),
      });
    }
  }
  printTables(rows, probes);
  printThreadSplit(rows, o);
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

function printTables(rows: PrecisionRow[], probes: Record<string, Awaited<ReturnType<typeof probeModel>>>) {
  const f = (v: number | undefined, d = 0) => (v === undefined ? '–' : v.toFixed(d));
  console.log('| model | devices | tandem fp32 | tandem bf16 | bf16 / fp32 | PyTorch fp32 (cl) | PyTorch bf16 (cl) |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const cells = [r.tandem.fp32, r.tandem.bf16].map(v => f(v));
    const ratio = f(r.tandem.bf16 / r.tandem.fp32, 2);
    console.log(
      `| ${r.model} | ${r.devices} | ${cells.join(' | ')} | ${ratio} | ${f(r.torch?.fp32)} | ${f(r.torch?.bf16)} |`,
    );
  }
  console.log(
    '\n(samples/s, one thread per device; PyTorch one process, channels_last, autocast for bf16; 1 device bf16: ' +
      'the median of the pairs below)\n',
  );
  for (const r of rows.filter(x => x.bf16Pairs)) {
    const p = r.bf16Pairs!;
    const on = (i: number) => (p.cpus.length > 0 ? ` (CPU ${p.cpus[i]})` : '');
    const each = p.tandem.map((t, i) => `${f(t)}/${f(p.torch[i])}${on(i)}`).join(', ');
    console.log(
      `${r.model}, 1 device bf16, tandem/PyTorch in turn: ${each}; median ratio ${f(r.bf16OverTorchBf16, 2)}`,
    );
  }
  console.log('');
  console.log(
    '| model | devices | tandem bf16 / PyTorch bf16 | (c)/(b): 2 devices / 1 device (bf16) | (d)/(b): ceiling | ' +
      'share of bf16 peak |',
  );
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const one = rows.find(x => x.model === r.model && x.devices === 1)!;
    const scale = r.devices === 1 ? '–' : f(r.tandem.bf16 / one.tandem.bf16, 2);
    const ceiling = r.bf16Independent === undefined ? '–' : f(r.bf16Independent / one.tandem.bf16, 2);
    const share = `${(100 * r.bf16PeakShare).toFixed(1)}%`;
    console.log(`| ${r.model} | ${r.devices} | ${f(r.bf16OverTorchBf16, 2)} | ${scale} | ${ceiling} | ${share} |`);
  }
  console.log(
    '\n(d): two independent 1-device bf16 trainings at once, their samples/s summed: what two threads of this ' +
      'machine give without any exchange, the ceiling for (c).\n',
  );
  console.log("One device's step, split (this thread, same batch per device):\n");
  console.log('| model | precision | step ms | native kernels ms | rest ms | MFLOP/sample |');
  console.log('|---|---|---:|---:|---:|---:|');
  for (const [model, p] of Object.entries(probes)) {
    for (const prec of ['fp32', 'bf16'] as const) {
      const s = p.split[prec];
      const cells = [s.stepMs, s.kernelMs, s.stepMs - s.kernelMs].map(v => v.toFixed(2));
      console.log(`| ${model} | ${prec} | ${cells.join(' | ')} | ${(p.flops / 1e6).toFixed(1)} |`);
    }
  }
  console.log('\noneDNN implementations in bf16 (kernel: implementation):');
  for (const [model, p] of Object.entries(probes)) {
    console.log(`  ${model}:`);
    for (const [kernel, impl] of Object.entries(p.split.bf16.implementations)) console.log(`    ${kernel}: ${impl}`);
  }
}

/** Where a 1-device bf16 step's CPU went, by thread (the median of the pairs' tandem runs, group by group). */
function printThreadSplit(rows: PrecisionRow[], o: PrecisionBenchOptions) {
  const split = rows.filter(r => r.bf16Threads && r.bf16Threads.length > 0);
  if (split.length === 0) return;
  const groups = THREAD_GROUPS.filter(g => split.some(r => r.bf16Threads!.some(t => t[g] > 0.005)));
  const pinned = o.pin ? ' (all on one core: they add up to the step)' : '';
  console.log(`\n1 device bf16, ms of CPU per step by thread${pinned}:\n`);
  console.log(`| model | ${groups.join(' | ')} | all | wall ms/step |`);
  console.log(`|---|${groups.map(() => '---:|').join('')}---:|---:|`);
  for (const r of split) {
    const t = r.bf16Threads!;
    const cells = groups.map(g => median(t.map(x => x[g])).toFixed(2));
    const all = median(t.map(x => THREAD_GROUPS.reduce((sum, g) => sum + x[g], 0))).toFixed(2);
    const wall = ((o.perDeviceBatch * 1000) / r.tandem.bf16).toFixed(2);
    console.log(`| ${r.model} | ${cells.join(' | ')} | ${all} | ${wall} |`);
  }
  console.log(
    "\n(main: the process's own thread, which hands out steps and loading and takes the reports; V8 and Node: " +
      "V8's garbage collection and compilation, libuv's pool)",
  );
}
