/**
 * The precision bench's rows (bench/precision.ts) and the tables it prints from them.
 */
import { THREAD_GROUPS, type ThreadCpu } from './thread-cpu.js';
import type { StepSplit } from './precision-probes.js';

export type Precision = 'fp32' | 'bf16';

/** PyTorch's rates, with glibc's malloc as it comes ('glibc') and keeping freed memory ('kept'): torch-reference.ts. */
export interface TorchRates {
  glibc: Record<Precision, number>;
  kept: Record<Precision, number>;
}

/** The 1-device bf16 comparison, one entry a run, in the order run: tandem, PyTorch (glibc), PyTorch (kept). */
export interface Bf16Runs {
  tandem: number[];
  /** tandem with every step through tfjs (TANDEM_STEP_REPLAY=off), in the same round: what the replay gives. */
  tandemLive: number[];
  /** Steps the replaying run replayed, of its steps. */
  tandemReplayed: number[];
  /**
   * Pinned rounds: tandem with the update on the comm thread (TANDEM_UPDATE_ON_COMPUTE=off), in the same round: what
   * updating on the compute thread gives on one CPU (src/actors/inline-update.ts). Empty unpinned.
   */
  tandemCommUpdate?: number[];
  /**
   * Pinned rounds: tandem with a loader thread (`loaderThreads: 1`), in the same round: what reading the batches on
   * the main thread gives on one CPU (docs/guide/data.md, loader threads). Empty unpinned.
   */
  tandemLoaderThread?: number[];
  torch: number[];
  torchKept: number[];
  /** The CPU each round ran on (`pin`; empty unpinned). */
  cpus: number[];
  /** Minor page faults per timed step: tandem's whole process, each PyTorch process. */
  tandemFaults: number[];
  torchFaults: number[];
  torchKeptFaults: number[];
}

export interface PrecisionRow {
  model: string;
  devices: number;
  tandem: Record<Precision, number>;
  torch?: TorchRates;
  /** The median of the rounds' tandem bf16 / PyTorch bf16 with glibc's malloc as it comes (1 device). */
  bf16OverTorchBf16?: number;
  /** The same against PyTorch keeping freed memory. */
  bf16OverTorchBf16Kept?: number;
  /** The same against the faster of the two PyTorch runs of each round: the goal's ratio. */
  bf16OverFasterTorch?: number;
  bf16Runs?: Bf16Runs;
  /**
   * 1 device bf16: each tandem run of the rounds, ms of CPU per step by thread (bench/thread-cpu.ts); with `pin`, all
   * on one core, so they add up to the step.
   */
  bf16Threads?: ThreadCpu[];
  bf16PeakShare: number;
  /** 2-device rows: two independent 1-device bf16 trainings at once, rates summed (the machine's ceiling, (d)). */
  bf16Independent?: number;
}

export interface ModelProbe {
  flops: number;
  split: Record<Precision, StepSplit>;
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const f = (v: number | undefined, d = 0) => (v === undefined ? '–' : v.toFixed(d));

export function printTables(rows: PrecisionRow[], probes: Record<string, ModelProbe>): void {
  printRates(rows);
  printRounds(rows);
  printRatios(rows);
  printSplit(probes);
}

function printRates(rows: PrecisionRow[]): void {
  console.log(
    '| model | devices | tandem fp32 | tandem bf16 | bf16 / fp32 | PyTorch fp32 (cl) | PyTorch bf16 (cl) | ' +
      'PyTorch fp32 (cl, kept) | PyTorch bf16 (cl, kept) |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const cells = [r.tandem.fp32, r.tandem.bf16].map(v => f(v));
    const ratio = f(r.tandem.bf16 / r.tandem.fp32, 2);
    const torch = [r.torch?.glibc.fp32, r.torch?.glibc.bf16, r.torch?.kept.fp32, r.torch?.kept.bf16].map(v => f(v));
    console.log(`| ${r.model} | ${r.devices} | ${cells.join(' | ')} | ${ratio} | ${torch.join(' | ')} |`);
  }
  console.log(
    "\n(samples/s, one thread per device; PyTorch one process, channels_last, autocast for bf16, with glibc's malloc " +
      'as it comes and keeping freed memory (kept: MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, ' +
      'bench/torch-reference.ts); 1 device bf16: the median of the rounds below)\n',
  );
}

function printRounds(rows: PrecisionRow[]): void {
  for (const r of rows.filter(x => x.bf16Runs)) {
    const p = r.bf16Runs!;
    const on = (i: number) => (p.cpus.length > 0 ? ` (CPU ${p.cpus[i]})` : '');
    const each = p.tandem
      .map((t, i) => `${f(t)}/${f(p.tandemLive[i])}/${f(p.torch[i])}/${f(p.torchKept[i])}${on(i)}`)
      .join(', ');
    console.log(`${r.model}, 1 device bf16, tandem/tandem unreplayed/PyTorch/PyTorch kept in turn: ${each}`);
    const gain = median(p.tandem.map((t, i) => t / p.tandemLive[i]));
    console.log(`  the replay: ${f(gain, 2)}× the unreplayed step (median), ${p.tandemReplayed.join(', ')} replayed`);
    const comm = p.tandemCommUpdate ?? [];
    if (comm.length > 0) {
      const inline = median(p.tandem.map((t, i) => t / comm[i]));
      const rates = comm.map(x => f(x)).join(', ');
      console.log(`  the update on the compute thread: ${f(inline, 2)}× on the comm thread (median; ${rates})`);
    }
    const loader = p.tandemLoaderThread ?? [];
    if (loader.length > 0) {
      const main = median(p.tandem.map((t, i) => t / loader[i]));
      const rates = loader.map(x => f(x)).join(', ');
      console.log(`  the batches read on the main thread: ${f(main, 2)}× a loader thread (median; ${rates})`);
    }
    const faults = [p.tandemFaults, p.torchFaults, p.torchKeptFaults].map(x => f(median(x)));
    console.log(`  minor page faults a step (medians): tandem ${faults[0]}, PyTorch ${faults[1]}, kept ${faults[2]}`);
  }
  console.log('');
}

function printRatios(rows: PrecisionRow[]): void {
  console.log(
    '| model | devices | tandem bf16 / PyTorch bf16 | / PyTorch bf16 kept | / the faster (goal) | ' +
      '(c)/(b): 2 devices / 1 device (bf16) | (d)/(b): ceiling | share of bf16 peak |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const one = rows.find(x => x.model === r.model && x.devices === 1)!;
    const scale = r.devices === 1 ? '–' : f(r.tandem.bf16 / one.tandem.bf16, 2);
    const ceiling = r.bf16Independent === undefined ? '–' : f(r.bf16Independent / one.tandem.bf16, 2);
    const share = `${(100 * r.bf16PeakShare).toFixed(1)}%`;
    const ratios = [r.bf16OverTorchBf16, r.bf16OverTorchBf16Kept, r.bf16OverFasterTorch].map(v => f(v, 2));
    console.log(`| ${r.model} | ${r.devices} | ${ratios.join(' | ')} | ${scale} | ${ceiling} | ${share} |`);
  }
  console.log(
    '\n(the goal: each round against the faster of its two PyTorch runs, the median of the rounds; (d): two ' +
      'independent 1-device bf16 trainings at once, their samples/s summed: what two threads of this machine give ' +
      'without any exchange, the ceiling for (c).)\n',
  );
}

function printSplit(probes: Record<string, ModelProbe>): void {
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

/** Where a 1-device bf16 step's CPU went, by thread (the median of the rounds' tandem runs, group by group). */
export function printThreadSplit(rows: PrecisionRow[], pin: boolean, perDeviceBatch: number): void {
  const split = rows.filter(r => r.bf16Threads && r.bf16Threads.length > 0);
  if (split.length === 0) return;
  const groups = THREAD_GROUPS.filter(g => split.some(r => r.bf16Threads!.some(t => t[g] > 0.005)));
  const pinned = pin ? ' (all on one core: they add up to the step)' : '';
  console.log(`\n1 device bf16, ms of CPU per step by thread${pinned}:\n`);
  console.log(`| model | ${groups.join(' | ')} | all | wall ms/step |`);
  console.log(`|---|${groups.map(() => '---:|').join('')}---:|---:|`);
  for (const r of split) {
    const t = r.bf16Threads!;
    const cells = groups.map(g => median(t.map(x => x[g])).toFixed(2));
    const all = median(t.map(x => THREAD_GROUPS.reduce((sum, g) => sum + x[g], 0))).toFixed(2);
    const wall = ((perDeviceBatch * 1000) / r.tandem.bf16).toFixed(2);
    console.log(`| ${r.model} | ${cells.join(' | ')} | ${all} | ${wall} |`);
  }
  console.log(
    "\n(main: the process's own thread, which hands out steps and loading and takes the reports; V8 and Node: " +
      "V8's garbage collection and compilation, libuv's pool)",
  );
}
