/**
 * The arithmetic of the hosts bench (`npm run bench -- hosts`), apart from
 * anything that runs: its options read from the command line, which steps a
 * run times, medians (the slower host's), the lower bound max(compute, comm) a schedule is held
 * to, the time an all-reduce takes at the link's line rate, and the table.
 */
import type { LinkRate } from './network-namespaces.js';
import type { SecretMode } from './hosts-line-rate.js';

export const HOSTS_MODELS = ['alexnet-mini', 'alexnet'] as const;
export type HostsModel = (typeof HOSTS_MODELS)[number];
export const HOSTS_RATES = ['10gbit', '1gbit', '100mbit'] as const satisfies readonly LinkRate[];
/**
 * tandem's schedules in the bench: sequential; two-group as the seed describes it (the next forward waits for the
 * whole update: --forward-wait step); two-group with per-group forward waits and the priority exchange (chunks of
 * PRIORITY_CHUNK floats); buckets; per-layer; and auto (--strategy auto --comm-hook auto: its own pick).
 */
export const SCHEDULES = [
  'sequential',
  'two-group-seed',
  'two-group-priority',
  'buckets',
  'per-layer',
  'auto',
] as const;
export type Schedule = (typeof SCHEDULES)[number];
export const DEFAULT_SCHEDULES: readonly Schedule[] = [
  'sequential',
  'two-group-seed',
  'two-group-priority',
  'buckets',
  'auto',
];
export const HOOKS = ['none', 'fp16', 'powersgd'] as const;
export type Hook = (typeof HOOKS)[number];
export const PRIORITY_CHUNK = 262144;

/**
 * The CLI flags of `schedule` with `hook` (two-group at `splitLayer` when known), and the key of auto's candidate that
 * predicts it.
 */
export function scheduleRun(
  schedule: Exclude<Schedule, 'auto'>,
  hook: Hook,
  splitLayer?: number,
): { args: string[]; key: string } {
  const split = splitLayer === undefined ? [] : ['--split-layer', String(splitLayer)];
  const hookArgs =
    hook === 'none'
      ? []
      : hook === 'powersgd'
        ? ['--comm-hook', 'powersgd', '--powersgd-start-step', '0']
        : ['--comm-hook', hook];
  const run = (strategy: string, more: string[], wait: 'group' | 'step', order: string) => ({
    args: ['--strategy', strategy, ...more, '--forward-wait', wait, ...hookArgs],
    key: `${strategy}/${wait}/${order}/${hook}`,
  });
  switch (schedule) {
    case 'sequential':
      return run('sequential', [], 'group', 'ready');
    case 'two-group-seed':
      return run('two-group', split, 'step', 'ready');
    case 'two-group-priority':
      return run(
        'two-group',
        [...split, '--exchange-order', 'priority', '--chunk-floats', String(PRIORITY_CHUNK)],
        'group',
        `priority:${PRIORITY_CHUNK}`,
      );
    case 'buckets':
      return run('buckets', [], 'group', 'ready');
    case 'per-layer':
      return run('per-layer', [], 'group', 'ready');
    default: {
      const never: never = schedule;
      throw new RangeError(`bench hosts: schedule ${String(never)}`);
    }
  }
}

/** Per model: samples per device per step, steps per run and the links run unless --rates says otherwise. */
export const MODEL_DEFAULTS: Record<HostsModel, { batch: number; steps: number; rates: readonly LinkRate[] }> = {
  'alexnet-mini': { batch: 32, steps: 24, rates: HOSTS_RATES },
  // 58M parameters, 227x227 images: ~2.5 s a step of 4 samples on one thread of this 2-core machine, and an all-reduce
  // moves 233 MB (~19 s at 100 Mbit/s: each uncompressed run at 100mbit takes minutes): a small batch, few steps
  alexnet: { batch: 4, steps: 6, rates: ['1gbit', '100mbit'] },
};

export interface HostsBenchOptions {
  models: HostsModel[];
  /** Undefined: each model's default links. */
  rates?: LinkRate[];
  /** Undefined: each model's default. */
  steps?: number;
  batch?: number;
  out: string;
  schedules: Schedule[];
  hooks: Hook[];
  /** PyTorch rows (compute alone, DDP): off with --quick. */
  torch: boolean;
  quick: boolean;
  /**
   * tandem's schedule rows with the job secret, without it (--insecure), or both, taking turns (--secret
   * with|without|both; default with): the secret's overhead in the same run.
   */
  secret: SecretMode[];
  /** --secret both: runs of each schedule per mode, taking turns (--repeats, default 1). */
  secretRounds: number;
}

type HostsFlags = {
  models?: string;
  rates?: string;
  links?: string;
  steps?: string;
  batch?: string;
  out?: string;
  schedules?: string;
  hooks?: string;
  quick?: boolean;
  secret?: string;
  repeats?: string;
};

/** `1G` / `100M` (as --links says it) or `1gbit` / `100mbit`. */
function rateOf(text: string): LinkRate {
  const short = /^(\d+(?:\.\d+)?)([kmg])$/i.exec(text);
  const r = short
    ? `${short[1]}${{ k: 'kbit', m: 'mbit', g: 'gbit' }[short[2].toLowerCase() as 'k' | 'm' | 'g']}`
    : text;
  if (!/^\d+(\.\d+)?(kbit|mbit|gbit)$/.test(r))
    throw new RangeError(`bench hosts: link rate '${text}' (--rates takes e.g. 10gbit,1gbit,100mbit or 10G,1G,100M)`);
  return r as LinkRate;
}

/**
 * Reads the bench's flags (comma lists), refusing a name it does not know. `--quick`: fewer steps (8; alexnet 5),
 * no PyTorch rows, the hooks none and fp16 unless --hooks says otherwise.
 */
export function parseHostsOptions(values: HostsFlags): HostsBenchOptions {
  const list = (text: string): string[] =>
    text
      .split(',')
      .map(s => s.trim())
      .filter(s => s !== '');
  const names = <T extends string>(
    flag: string,
    text: string | undefined,
    known: readonly T[],
    fallback: readonly T[],
  ): T[] =>
    text === undefined
      ? [...fallback]
      : list(text).map(m => {
          if (!(known as readonly string[]).includes(m))
            throw new RangeError(
              `bench hosts: unknown ${flag === 'models' ? 'model' : flag.replace(/s$/, '')} '${m}' (--${flag} takes ` +
                `${known.join(', ')})`,
            );
          return m as T;
        });
  const models = names('models', values.models, HOSTS_MODELS, HOSTS_MODELS);
  const rateText = values.rates ?? values.links;
  const rates = rateText === undefined ? undefined : list(rateText).map(rateOf);
  const count = (name: string, text: string | undefined, min: number): number | undefined => {
    if (text === undefined) return undefined;
    const n = Number(text);
    if (!Number.isInteger(n) || n < min)
      throw new RangeError(`bench hosts: --${name} must be an integer >= ${min}, got '${text}'`);
    return n;
  };
  const quick = values.quick === true;
  return {
    models,
    rates,
    steps: count('steps', values.steps, 4),
    batch: count('batch', values.batch, 1),
    out: values.out ?? 'bench/results',
    schedules: names('schedules', values.schedules, SCHEDULES, DEFAULT_SCHEDULES),
    hooks: names('hooks', values.hooks, HOOKS, quick ? ['none', 'fp16'] : HOOKS),
    torch: !quick,
    quick,
    secret: secretModes(values.secret),
    secretRounds: count('repeats', values.repeats, 1) ?? 1,
  };
}

function secretModes(text: string | undefined): SecretMode[] {
  switch (text) {
    case undefined:
    case 'with':
      return ['with'];
    case 'without':
      return ['without'];
    case 'both':
      return ['with', 'without'];
    default:
      throw new RangeError(`bench hosts: --secret takes with, without or both, got '${text}'`);
  }
}

/** Steps of a run: --steps, else the model's default (--quick: 8, alexnet 5). */
export function stepsOf(model: HostsModel, opts: HostsBenchOptions): number {
  return opts.steps ?? (opts.quick ? (model === 'alexnet' ? 5 : 8) : MODEL_DEFAULTS[model].steps);
}

/** Untimed first steps of a run of `steps` (a third, at least one): 24 steps time the last 16. */
export function untimedSteps(steps: number): number {
  return Math.max(1, Math.ceil(steps / 3));
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new RangeError('median of nothing');
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * The slower host's median (hosts' steps are pipelined: one host's step s may end before the other's; their medians
 * agree better than step by step).
 */
export function slowerHostMedian(perHost: readonly (readonly number[])[]): number {
  return Math.max(...perHost.map(median));
}

/**
 * ms an all-reduce of `floats` float32 over 2 hosts takes at `bitsPerSecond`: each host sends half in the
 * reduce-scatter, half in the all-gather.
 */
export function lineRateAllReduceMs(floats: number, bitsPerSecond: number, hosts = 2): number {
  const bytesSent = ((2 * (hosts - 1)) / hosts) * floats * 4;
  return ((bytesSent * 8) / bitsPerSecond) * 1000;
}

export function bitsPerSecondOf(rate: LinkRate): number {
  const m = /^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$/.exec(rate);
  if (!m) throw new RangeError(`link rate ${rate}: expected e.g. 100mbit`);
  return Number(m[1]) * { kbit: 1e3, mbit: 1e6, gbit: 1e9 }[m[2] as 'kbit' | 'mbit' | 'gbit'];
}

/** The lower bound a step is held to: compute and the gradient's all-reduce overlapped perfectly. */
export function lowerBoundMs(computeMs: number, commMs: number): number {
  return Math.max(computeMs, commMs);
}

/** What a row of the table is: a schedule of tandem's across the 2 hosts, PyTorch DDP, or one of the bounds' parts. */
export type RowKind = 'tandem' | 'ddp' | 'compute-only' | 'comm';

export interface HostsRow {
  model: HostsModel;
  link: LinkRate;
  kind: RowKind;
  /** The schedule (tandem), 'DDP (PyTorch x.y)', '1 device alone', 'all-reduce'. */
  schedule: string;
  stepMs: number;
  /** Global samples/s (compute-only: the one device's); absent for the all-reduce. */
  samplesPerSecond?: number;
  /** The lower bound this row is held to (tandem, ddp): max(compute, comm), the compute of its own framework. */
  lowerBoundMs?: number;
  /** The same bound with the all-reduce at the link's line rate: max(compute, lineRateAllReduceMs). */
  lineRateBoundMs?: number;
  /** Every timed step's ms, per host (compute-only: the one process; comm: each all-reduce, per host). */
  hostsMs: number[][];
  /** comm row: the link as auto measured it at start (α, β). */
  measuredLink?: { alphaMs: number; bitsPerSecond: number; source: string; samples?: { bytes: number; ms: number }[] };
  /**
   * tandem: the cost model's prediction of this schedule (auto's candidate of the same key, on the link it measured).
   */
  predictedMs?: number;
  /** tandem: the process CPU per step the prediction counted, and whether that (over the host's cores) set it. */
  predictedCpuMsPerStep?: number;
  predictedCpuBound?: boolean;
  /** tandem, when the bench ran both: whether this row's hosts held the job secret (without: --insecure). */
  secret?: SecretMode;
  /** tandem with --secret both: each round's slower-host median, in the order run. */
  roundsMs?: number[];
  /** tandem: hosts that printed their last step but did not exit (killed after a grace; their steps are counted). */
  hostsHungAtExit?: number[];
  /**
   * tandem, compute-only: each process's CPU time (every thread) per step over the timed steps (bench/process-cpu.ts).
   */
  cpuMsPerStep?: number[];
  /** Σ cpuMsPerStep / this machine's cores: no step can be shorter while these processes share these cores. */
  cpuBoundMs?: number;
  /** tandem: the bound on this machine: max(lower bound, compute with both hosts computing at once, the CPU bound). */
  machineBoundMs?: number;
  /**
   * tandem: the whole machine per step over the same steps (/proc/stat, every CPU): busy (every process and the
   * kernel, the network's work included), of it the kernel's, and idle (ms of CPU time per step).
   */
  machineMsPerStep?: { busyMs: number; idleMs: number; kernelMs: number };
}

export function printHostsTable(rows: readonly HostsRow[]): void {
  console.log(
    '\n| model | link (real TCP, tc tbf) | schedule | step ms | predicted ms | step / predicted | samples/s | lower ' +
      'bound ms | step / lower bound | CPU per step ms (per process) | machine bound ms | step / machine bound |',
  );
  console.log('|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const sps = r.samplesPerSecond === undefined ? '' : r.samplesPerSecond.toFixed(1);
    const lb = r.lowerBoundMs === undefined ? '' : r.lowerBoundMs.toFixed(0);
    const ratio = r.lowerBoundMs === undefined ? '' : (r.stepMs / r.lowerBoundMs).toFixed(2);
    const cpu = r.cpuMsPerStep === undefined ? '' : r.cpuMsPerStep.map(c => c.toFixed(0)).join(' + ');
    const machine = r.machineBoundMs === undefined ? '' : r.machineBoundMs.toFixed(0);
    const machineRatio = r.machineBoundMs === undefined ? '' : (r.stepMs / r.machineBoundMs).toFixed(2);
    const hung = r.hostsHungAtExit ? ' †' : '';
    const predicted = r.predictedMs === undefined ? '' : r.predictedMs.toFixed(1);
    const vsPredicted = r.predictedMs === undefined ? '' : (r.stepMs / r.predictedMs).toFixed(2);
    console.log(
      `| ${r.model} | ${r.link} | ${r.schedule}${hung} | ${r.stepMs.toFixed(1)} | ${predicted} | ${vsPredicted} | ` +
        `${sps} | ${lb} | ${ratio} | ${cpu} | ${machine} | ${machineRatio} |`,
    );
  }
  if (rows.some(r => r.hostsHungAtExit))
    console.log('\n† a host hung after its last step (did not exit) and was killed; its steps are counted.');
}

/**
 * The same rows per model and link as one line per schedule and a column per hook: step ms (step / predicted),
 * beside the link's bounds and DDP — the README's form of the table.
 */
export function printScheduleByHookTable(rows: readonly HostsRow[], hooks: readonly Hook[]): void {
  const cell = (r: HostsRow | undefined): string =>
    r === undefined
      ? ''
      : `${r.stepMs.toFixed(1)}${r.predictedMs === undefined ? '' : ` (${(r.stepMs / r.predictedMs).toFixed(2)})`}`;
  for (const model of [...new Set(rows.map(r => r.model))]) {
    const alone = rows.find(
      r => r.model === model && r.kind === 'compute-only' && r.schedule.startsWith('tandem, 1 device alone'),
    );
    const both = rows.find(
      r => r.model === model && r.kind === 'compute-only' && r.schedule.includes('2 processes at once'),
    );
    for (const link of [...new Set(rows.filter(r => r.model === model && r.link !== 'none').map(r => r.link))]) {
      const here = rows.filter(r => r.model === model && r.link === link);
      const comm = here.find(r => r.kind === 'comm'),
        ddp = here.find(r => r.kind === 'ddp');
      console.log(
        `\n${model} at ${link} (real TCP, tc tbf): compute alone ${alone?.stepMs.toFixed(1)} ms, both hosts ` +
          `computing at once ` +
          (`${both?.stepMs.toFixed(1)} ms, all-reduce of the gradient ${comm?.stepMs.toFixed(1)} ms; PyTorch DDP ` +
            `${ddp ? `${ddp.stepMs.toFixed(1)} ms` : 'not run'}. `) +
          'Step ms (measured / predicted):\n',
      );
      console.log(`| schedule | ${hooks.map(h => (h === 'none' ? 'no hook' : h)).join(' | ')} |`);
      console.log(`|---|${hooks.map(() => '---:').join('|')}|`);
      const tandem = here.filter(r => r.kind === 'tandem');
      const schedules = [...new Set(tandem.map(r => r.schedule.replace(/ \+ (fp16|bf16|powersgd)$/, '')))];
      for (const s of schedules) {
        if (s.startsWith('auto')) {
          const r = tandem.find(x => x.schedule === s);
          console.log(
            `| ${s} | ${cell(r)} |${hooks
              .slice(1)
              .map(() => '')
              .join(' |')} |`,
          );
          continue;
        }
        console.log(
          `| ${s} | ${hooks.map(h => cell(tandem.find(r => r.schedule === scheduleName(s, h)))).join(' | ')} |`,
        );
      }
    }
  }
}

/** The schedule of a row: `s`, with the hook after a plus when there is one. */
function scheduleName(s: string, hook: string): string {
  return hook === 'none' ? s : `${s} + ${hook}`;
}
