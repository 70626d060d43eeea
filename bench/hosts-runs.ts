/**
 * The runs of the hosts bench (`npm run bench -- hosts`), each a set of real
 * processes: tandem on 2 hosts × 1 device (the CLI with --hosts 2, one
 * process in each network namespace), tandem on one device alone (compute
 * only) and PyTorch on one process alone, the gloo all-reduce probe (bench/hosts-link-probe.ts) across the
 * link, and PyTorch DDP over gloo with a tcp:// init (bench/torch/harness.py
 * --mode ddp-rank, one rank in each namespace, GLOO_SOCKET_IFNAME = the veth).
 * Each returns its timed steps' ms per host (the untimed first steps left out).
 */
import { fileURLToPath } from 'node:url';
import type { HostPair } from './network-namespaces.js';
import { jsonLines, runAllHere, runHere, runOnHosts, type HostCommand, type OnStart } from './hosts-job.js';
import { meterStepCpu, meterStepMachine, type MachineCpu } from './process-cpu.js';
import type { HostsModel } from './hosts-figures.js';
import type { SecretMode } from './hosts-line-rate.js';
import { torchScriptPath } from './torch-reference.js';
import type { ProbeResult } from './hosts-link-probe.js';

const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const PROBE = fileURLToPath(new URL('./hosts-link-probe.js', import.meta.url));
/** tandem: OpenMP threads of the one native device per host; PyTorch: torch threads per rank. */
export const DEVICE_THREADS = 1;

export interface RunShape {
  model: HostsModel;
  batchPerDevice: number;
  steps: number;
  untimed: number;
  timeoutMs: number;
}

/**
 * A tandem run's timed steps' ms per host, the model's parameter count, the hosts killed after their last step (see
 * runOnHosts);
 * `cpuMsPerStep`: each process's CPU (every thread) per step over the timed steps but the last (process-cpu.ts), where
 * /proc told.
 */
export interface TandemTimes {
  hostsMs: number[][];
  parameters: number;
  hungAtExit?: number[];
  auto?: AutoEvent;
  cpuMsPerStep?: number[];
  /** The whole machine's CPU per step over the same steps (host 0's), the kernel's included. */
  machineMsPerStep?: MachineCpu;
}

/**
 * Meters each started process's CPU over steps (untimed, steps - 1]; `read()` gives them all, or undefined if one is
 * missing.
 */
function cpuMeters(shape: RunShape): {
  onStart: OnStart;
  read: () => number[] | undefined;
  machine: () => MachineCpu | undefined;
} {
  const meters: (() => number | undefined)[] = [];
  let machine: () => MachineCpu | undefined = () => undefined;
  return {
    onStart: (i, child) => {
      meters[i] = meterStepCpu(child, shape.untimed, shape.steps - 1);
      if (i === 0) machine = meterStepMachine(child, shape.untimed, shape.steps - 1);
    },
    read: () => {
      const cpu = meters.map(m => m());
      return cpu.length > 0 && cpu.every(c => c !== undefined) ? (cpu as number[]) : undefined;
    },
    machine: () => machine(),
  };
}

/** What `--strategy auto --json` prints on host 0 (src/cli/main.ts autoEvent). */
export interface AutoEvent {
  strategy: string;
  splitLayer?: number;
  forwardWait: string;
  exchangeOrder: string;
  chunkFloats?: number;
  commHook?: string;
  predictedMs: number;
  reason: string;
  link?: { alphaMs: number; bitsPerSecond: number; source: string; samples?: { bytes: number; ms: number }[] };
  candidates: { key: string; predictedMs: number; splitLayer?: number; cpuMsPerStep?: number; cpuBound?: boolean }[];
}

/** `schedule`: the flags of the schedule (--strategy ... ). */
function trainArgs(shape: RunShape, schedule: readonly string[], hosts: number): string[] {
  return [
    CLI,
    'train',
    '--model',
    shape.model,
    '--data',
    'synthetic-images',
    '--dataset-size',
    '512',
    '--classes',
    '10',
    '--backend',
    'native',
    '--native-threads',
    String(DEVICE_THREADS),
    '--devices',
    '1',
    '--batch',
    String(hosts * shape.batchPerDevice),
    '--steps',
    String(shape.steps),
    ...schedule,
    '--optimizer',
    'sgd',
    '--lr',
    '0.01',
    '--json',
    '--verbose',
  ]; // --verbose: every host prints its own steps
}

/**
 * The step events' ms after the untimed steps, and the parameter count (the 'ready' event), from a host's --json
 * output.
 */
function tandemTimes(stdout: string, shape: RunShape, label: string): { ms: number[]; parameters: number } {
  const lines = jsonLines(stdout);
  const ms = lines.filter(l => l.event === 'step' && (l.step as number) > shape.untimed).map(l => l.stepMs as number);
  const ready = lines.find(l => l.event === 'ready');
  if (ms.length !== shape.steps - shape.untimed || typeof ready?.parameters !== 'number') {
    throw new Error(
      `hosts bench: ${label}: expected ${shape.steps - shape.untimed} timed step events and a ready event, got ` +
        `${ms.length} and ${ready ? 'one' : 'none'}`,
    );
  }
  return { ms, parameters: ready.parameters };
}

/**
 * tandem on 2 hosts × 1 device, `schedule` (its flags), host 0 serving the rendezvous at its address on `port`;
 * `tracePath`: host 0 writes the run's Chrome trace there (every host's spans).
 */
export async function tandemAcrossHosts(
  net: HostPair,
  shape: RunShape,
  schedule: readonly string[],
  port: number,
  tracePath?: string,
  secret: SecretMode = 'with',
): Promise<TandemTimes> {
  const label = `tandem ${shape.model} ${schedule.join(' ')} on 2 hosts (${secret} the job secret)`;
  const command = (h: 0 | 1): HostCommand => ({
    command: process.execPath,
    // a multi-host run needs the job's secret (docs/guide/security.md); without one it runs only with --insecure
    env: { TANDEM_JOB_SECRET: secret === 'with' ? BENCH_JOB_SECRET : '' },
    args: [
      ...trainArgs(shape, schedule, 2),
      ...(secret === 'without' ? ['--insecure'] : []),
      '--hosts',
      '2',
      '--host-rank',
      String(h),
      '--rendezvous',
      `${net.addresses[0]}:${port}`,
      ...(h === 0 && tracePath !== undefined ? ['--trace', tracePath] : []),
    ],
  });
  const lastStep = `"event":"step","step":${shape.steps},`;
  const cpu = cpuMeters(shape);
  const { outs, hungAtExit } = await runOnHosts(
    net,
    [command(0), command(1)],
    shape.timeoutMs,
    label,
    o => o.includes(lastStep),
    cpu.onStart,
  );
  const hosts = outs.map(o => tandemTimes(o, shape, label));
  const auto = jsonLines(outs[0]).find(l => l.event === 'auto') as AutoEvent | undefined;
  const cpuMsPerStep = cpu.read(),
    machineMsPerStep = cpu.machine();
  return {
    hostsMs: hosts.map(h => h.ms),
    parameters: hosts[0].parameters,
    hungAtExit,
    ...(auto ? { auto } : {}),
    ...(cpuMsPerStep ? { cpuMsPerStep } : {}),
    ...(machineMsPerStep ? { machineMsPerStep } : {}),
  };
}

/**
 * tandem on one device, no exchange, the same per-device batch: `processes` independent processes at once
 * (1: one device alone; 2: what compute alone gets when both hosts of this machine compute at once).
 */
export async function tandemComputeOnly(shape: RunShape, processes = 1): Promise<TandemTimes> {
  const label = `tandem ${shape.model} on one device${processes > 1 ? ` (${processes} processes at once)` : ''}`;
  const command: HostCommand = { command: process.execPath, args: trainArgs(shape, ['--strategy', 'sequential'], 1) };
  const cpu = cpuMeters(shape);
  const outs = await runAllHere(
    Array.from({ length: processes }, () => command),
    shape.timeoutMs,
    label,
    cpu.onStart,
  );
  const runs = outs.map(o => tandemTimes(o, shape, label));
  const cpuMsPerStep = cpu.read();
  return { hostsMs: runs.map(t => t.ms), parameters: runs[0].parameters, ...(cpuMsPerStep ? { cpuMsPerStep } : {}) };
}

/** PyTorch on one process alone (harness.py --mode single), the same batch and threads: its median step ms. */
export async function torchComputeOnly(
  python: string,
  shape: RunShape,
): Promise<{ medianMs: number; torch: string; parameters: number }> {
  const out = await runHere(
    {
      command: python,
      args: [
        torchScriptPath(shape.model),
        '--mode',
        'single',
        '--batch',
        String(shape.batchPerDevice),
        '--warmup',
        String(shape.untimed),
        '--steps',
        String(shape.steps - shape.untimed),
        '--threads',
        String(DEVICE_THREADS),
      ],
    },
    shape.timeoutMs,
    `PyTorch ${shape.model} alone`,
  );
  const r = jsonLines(out).at(-1);
  if (r === undefined || typeof r.medianMsPerStep !== 'number')
    throw new Error(`hosts bench: PyTorch ${shape.model} alone printed no result: ${out.slice(0, 300)}`);
  return { medianMs: r.medianMsPerStep, torch: String(r.torch), parameters: r.trainableParameters as number };
}

/** `repeats` timed all-reduces (mean) of `floats` over tandem's gloo transport between the 2 hosts, per host. */
export async function allReduceAcrossHosts(
  net: HostPair,
  floats: number,
  repeats: number,
  port: number,
  timeoutMs: number,
): Promise<number[][]> {
  const command = (h: 0 | 1): HostCommand => ({
    command: process.execPath,
    args: [
      PROBE,
      JSON.stringify({ rank: h, store: `${net.addresses[0]}:${port}`, hostname: net.addresses[h], floats, repeats }),
    ],
  });
  const { outs } = await runOnHosts(net, [command(0), command(1)], timeoutMs, `all-reduce of ${floats} floats`);
  return outs.map(o => {
    const r = jsonLines(o).at(-1) as ProbeResult | undefined;
    if (r === undefined || r.ms.length !== repeats)
      throw new Error(`hosts bench: the all-reduce probe printed no result: ${o.slice(0, 300)}`);
    return r.ms;
  });
}

/** The job secret both hosts of a bench run hold, as `tandem launch` would give them one. */
const BENCH_JOB_SECRET = 'the hosts bench job secret, 32 bytes or more';

/** A DDP rank's report (harness.py --mode ddp-rank). */
interface DdpRank {
  torch: string;
  trainableParameters: number;
  stepMs: number[];
}

/** PyTorch DDP (gloo, tcp:// init at host 0's address) on the same model, one rank per host. */
export async function ddpAcrossHosts(
  net: HostPair,
  python: string,
  shape: RunShape,
  port: number,
): Promise<{ hostsMs: number[][]; torch: string; parameters: number }> {
  const command = (h: 0 | 1): HostCommand => ({
    command: python,
    args: [
      torchScriptPath(shape.model),
      '--mode',
      'ddp-rank',
      '--rank',
      String(h),
      '--procs',
      '2',
      '--init-method',
      `tcp://${net.addresses[0]}:${port}`,
      '--batch',
      String(shape.batchPerDevice),
      '--warmup',
      String(shape.untimed),
      '--steps',
      String(shape.steps - shape.untimed),
      '--threads',
      String(DEVICE_THREADS),
      '--collective-timeout',
      String(Math.ceil(shape.timeoutMs / 1000)),
    ],
    env: { GLOO_SOCKET_IFNAME: net.links[h], PYTHONUNBUFFERED: '1' },
  });
  const { outs } = await runOnHosts(
    net,
    [command(0), command(1)],
    shape.timeoutMs,
    `PyTorch DDP ${shape.model} on 2 hosts`,
  );
  const ranks = outs.map(o => {
    const r = jsonLines(o).at(-1) as DdpRank | undefined;
    if (r === undefined || !Array.isArray(r.stepMs))
      throw new Error(`hosts bench: a DDP rank printed no result: ${o.slice(0, 300)}`);
    return r;
  });
  return { hostsMs: ranks.map(r => r.stepMs), torch: ranks[0].torch, parameters: ranks[0].trainableParameters };
}
