/**
 * Predicts the steady step time of one schedule — strategy (its exchange
 * groups) × forward wait × exchange order (chunk size) × comm hook — from a
 * profile, a link (α, β: link-fit.ts) and the hooks' CPU costs, by simulating
 * a device's two queues over several steps:
 *
 * - compute: forward layer by layer (input layer first), each layer waiting
 *   for its group's update of the last step (`forwardWait: 'group'`) or
 *   every group before forward starts (`step`); then backward in
 *   transmission order; a group is ready when backward has passed its last layer.
 * - comm: one exchange at a time. `ready`: groups in transmission order, as
 *   they become ready. `priority`: chunks of `chunkFloats` (a whole group
 *   with a hook), the highest-priority ready group's next chunk first
 *   (priority = the order forward needs them), plus one agreement (α) per
 *   chunk across hosts. A group's update follows its last chunk.
 * - an exchange: max(shared-memory all-reduce among this host's devices,
 *   the link's α + β·wire bytes); a hook changes the bytes (fp16/bf16: an
 *   all-gather of half; PowerSGD: all-reduces of P and Q at rank r and of the
 *   uncompressed rest) and adds its compute (hook-costs.ts).
 *
 * The step's overhead (profile.overheadMs) comes before forward's first
 * layer, once it may start; across hosts, so does the wait for the slowest
 * host (lockstep.ts: e(hosts) × the calibration's step spread). The period of
 * the last steps is the simulated step; the prediction is the larger of it and
 * the CPU ceiling (cpu-ceiling.ts: the step's CPU over this host's cores, plus
 * that wait, when cores idle), where the profile's calibration measured the
 * CPU and the machine says its cores.
 */
import { layoutParameters, type ParameterGroup, type ParameterLayout } from '../model/parameter-layout.js';
import { compressibleShape } from '../pipeline/hooks/power-sgd.js';
import { allGatherLinkMs, allReduceLinkMs, allReduceWireBytes, linkCpuMs, type LinkCost } from './link-fit.js';
import { cpuCeilingMs, type CpuShare } from './cpu-ceiling.js';
import { lockstepMs } from './lockstep.js';
import type { CompressionHook, HookCosts } from './hook-costs.js';
import type { ModelProfile } from './layer-profile.js';

export type HookChoice = 'none' | CompressionHook;
export type OrderChoice = { order: 'ready' } | { order: 'priority'; chunkFloats: number };

export interface ScheduleSpec {
  strategy: string;
  groups: readonly ParameterGroup[];
  forwardWait: 'group' | 'step';
  exchange: OrderChoice;
  hook: HookChoice;
}

export interface Machine {
  /** Devices on this host (the shared-memory all-reduce among them). */
  localDevices: number;
  /** The link between hosts (or the emulated one); none: one host, shared memory only. */
  link?: LinkCost;
  hookCosts: HookCosts;
  powerSgd: { rank: number; minCompressionRate: number };
  /** This host's share of the machine's cores; undefined: no CPU ceiling. */
  cpu?: CpuShare;
  /**
   * Hosts in lockstep (every exchange needs each): more than 1 adds the wait for the slowest (lockstep.ts). Default 1.
   */
  hosts?: number;
}

/** A schedule's prediction: `ms` = max(`periodMs`, `cpuCeilingMs`). */
export interface SchedulePrediction {
  ms: number;
  /** The simulated period of the two queues. */
  periodMs: number;
  /**
   * Process CPU per step (calibrated trial + the schedule's exchanges across hosts + hook compute); undefined: not
   * measured.
   */
  cpuMsPerStep?: number;
  /** cpuMsPerStep over this host's cores; undefined without either. */
  cpuCeilingMs?: number;
  /** Whether the ceiling is the prediction (above the simulated period). */
  cpuBound: boolean;
  /**
   * Each step's wait for the slowest host (lockstep.ts), in both the period and the ceiling; 0 on one host or without a
   * measured spread.
   */
  lockstepMs: number;
}

const SIMULATED_STEPS = 8;

/**
 * One group's exchange as the comm queue runs it: its chunks' ms, then the update's ms; `cpuMs`: the process CPU its
 * exchange adds to the calibrated step's (messages across hosts, hook compute).
 */
interface GroupWork {
  chunksMs: number[];
  updateMs: number;
  lastLayer: number;
  priority: number;
  cpuMs: number;
}

/** One exchange's time, and the process CPU it adds. */
interface Work {
  ms: number;
  cpuMs: number;
}

/** The predicted steady step ms of `spec`. */
export function predictScheduleMs(profile: ModelProfile, spec: ScheduleSpec, machine: Machine): number {
  return predictSchedule(profile, spec, machine).ms;
}

/** The predicted steady step of `spec`: the simulated period, raised to the CPU ceiling where that is higher. */
export function predictSchedule(profile: ModelProfile, spec: ScheduleSpec, machine: Machine): SchedulePrediction {
  const layout = layoutParameters(profile.weights);
  const layerIndex = new Map(profile.layers.map((l, i) => [l.name, i]));
  const work = spec.groups.map((g, gi) => groupWork(profile, layout, layerIndex, g, gi, spec, machine));
  const groupsOfLayer = layerGroups(profile, layout, layerIndex, spec.groups);
  const fwd = scaled(
    profile.layers.map(l => l.forwardMs),
    profile.stepForwardMs,
  );
  const bwd = scaled(
    profile.layers.map(l => l.backwardMs),
    profile.stepBackwardMs,
  );
  const lockstep = lockstepMs(profile.calibration?.stepSpreadMs ?? 0, machine.hosts ?? 1);
  let computeFree = 0,
    commFree = 0;
  let done: number[] = spec.groups.map(() => 0);
  const stepEnds: number[] = [];
  for (let s = 0; s < SIMULATED_STEPS; s++) {
    let t = computeFree;
    if (spec.forwardWait === 'step') t = Math.max(t, ...done);
    for (let i = profile.layers.length - 1; i >= 0; i--) {
      for (const g of groupsOfLayer[i]) t = Math.max(t, done[g]);
      // the parameters, the hand-off, the slowest host: once forward may start
      if (i === profile.layers.length - 1) t += profile.overheadMs + lockstep;
      t += fwd[i];
    }
    const passed: number[] = [];
    for (let i = 0; i < profile.layers.length; i++) {
      t += bwd[i];
      passed.push(t);
    }
    computeFree = t;
    const ready = work.map(w => (w.lastLayer < 0 ? t : passed[w.lastLayer]));
    ({ done, free: commFree } = runComm(work, ready, commFree, spec.exchange.order));
    stepEnds.push(Math.max(computeFree, ...done));
  }
  const k = SIMULATED_STEPS >> 1;
  const periodMs = (stepEnds[SIMULATED_STEPS - 1] - stepEnds[SIMULATED_STEPS - 1 - k]) / k;
  return withCpuCeiling(periodMs, profile, work, machine, lockstep);
}

/**
 * max(period, CPU per step / cores + the lockstep wait, when the cores idle through it): CPU per step = the calibrated
 * trial's + every group's exchange CPU.
 */
function withCpuCeiling(
  periodMs: number,
  profile: ModelProfile,
  work: readonly GroupWork[],
  machine: Machine,
  lockstepMs: number,
): SchedulePrediction {
  const calibrated = profile.calibration?.cpuMsPerStep;
  if (calibrated === undefined) return { ms: periodMs, periodMs, cpuBound: false, lockstepMs };
  const cpuMsPerStep = calibrated + work.reduce((sum, w) => sum + w.cpuMs, 0);
  if (!machine.cpu) return { ms: periodMs, periodMs, cpuMsPerStep, cpuBound: false, lockstepMs };
  const ceiling = cpuCeilingMs(cpuMsPerStep, machine.cpu) + lockstepMs;
  return {
    ms: Math.max(periodMs, ceiling),
    periodMs,
    cpuMsPerStep,
    cpuCeilingMs: ceiling,
    cpuBound: ceiling > periodMs,
    lockstepMs,
  };
}

/** The comm queue over one step's groups: when each group is applied, and when the queue is free again. */
function runComm(
  work: readonly GroupWork[],
  ready: readonly number[],
  free: number,
  order: 'ready' | 'priority',
): { done: number[]; free: number } {
  const done = work.map(() => 0);
  const next = work.map(() => 0);
  const left = new Set(work.map((_, g) => g));
  while (left.size > 0) {
    let pick = -1;
    if (order === 'ready') pick = Math.min(...left);
    else {
      for (const g of left) if (ready[g] <= free && (pick < 0 || work[g].priority > work[pick].priority)) pick = g;
      if (pick < 0) pick = [...left].reduce((a, b) => (ready[b] < ready[a] ? b : a));
    }
    const w = work[pick];
    free = Math.max(free, ready[pick]) + (w.chunksMs[next[pick]] ?? 0);
    if (++next[pick] >= w.chunksMs.length) {
      free += w.updateMs;
      done[pick] = free;
      left.delete(pick);
    }
  }
  return { done, free };
}

function groupWork(
  profile: ModelProfile,
  layout: ParameterLayout,
  layerIndex: Map<string, number>,
  g: ParameterGroup,
  gi: number,
  spec: ScheduleSpec,
  machine: Machine,
): GroupWork {
  let lastLayer = -1;
  for (const v of layout.variables)
    if (v.offset >= g.start && v.offset < g.end)
      lastLayer = Math.max(lastLayer, layerIndex.get(v.layer) ?? profile.layers.length - 1);
  const floats = g.end - g.start;
  const updateMs = (floats * 4) / profile.updateBytesPerMs;
  const agrees = machine.link && machine.link.ranks > 1 && spec.exchange.order === 'priority';
  const agree: Work = agrees ? { ms: machine.link!.alphaMs, cpuMs: linkCpuMs(machine.link!, 0) } : { ms: 0, cpuMs: 0 };
  const chunks: Work[] = [];
  if (spec.hook === 'none') {
    const chunk = spec.exchange.order === 'priority' ? spec.exchange.chunkFloats : floats;
    for (let at = 0; at < floats; at += chunk)
      chunks.push(plus(plainWork(profile, machine, Math.min(chunk, floats - at) * 4), agree));
    if (chunks.length === 0) chunks.push({ ms: 0, cpuMs: 0 });
  } else {
    chunks.push(plus(hookWork(profile, layout, g, spec.hook, machine), agree));
  }
  return {
    chunksMs: chunks.map(c => c.ms),
    cpuMs: chunks.reduce((sum, c) => sum + c.cpuMs, 0),
    updateMs,
    lastLayer,
    priority: gi,
  };
}

function plus(a: Work, b: Work): Work {
  return { ms: a.ms + b.ms, cpuMs: a.cpuMs + b.cpuMs };
}

/**
 * An all-reduce of `bytes`: the shared-memory stage among this host's devices, the link's. Its CPU: the link's
 * message (the shared-memory stage's is in the calibrated trial's CPU, which ran it on the same devices).
 */
function plainWork(profile: ModelProfile, machine: Machine, bytes: number): Work {
  const memoryMs = machine.localDevices > 1 ? (2 * bytes) / machine.localDevices / profile.exchangeBytesPerMs : 0;
  const link = machine.link;
  return {
    ms: Math.max(memoryMs, link ? allReduceLinkMs(link, bytes) : 0),
    cpuMs: link ? linkCpuMs(link, allReduceWireBytes(bytes, link.ranks)) : 0,
  };
}

/**
 * A hook's exchange of group `g`. An EMULATED link (`--link`, one host) holds every exchange for the full group's
 * wire time whatever crosses (emulate-link.ts): there the hook only adds its work, over shared memory, under that hold.
 */
function hookWork(
  profile: ModelProfile,
  layout: ParameterLayout,
  g: ParameterGroup,
  hook: Exclude<HookChoice, 'none'>,
  machine: Machine,
): Work {
  const link = machine.link;
  if (link?.source === 'emulated') {
    const work = hookWorkAt(profile, layout, g, hook, { ...machine, link: undefined, localDevices: link.ranks });
    return { ms: Math.max(allReduceLinkMs(link, (g.end - g.start) * 4), work.ms), cpuMs: work.cpuMs };
  }
  return hookWorkAt(profile, layout, g, hook, machine);
}

/** The hook's compute (CPU, on the comm thread) and its exchanges: their time, and their CPU across hosts. */
function hookWorkAt(
  profile: ModelProfile,
  layout: ParameterLayout,
  g: ParameterGroup,
  hook: Exclude<HookChoice, 'none'>,
  machine: Machine,
): Work {
  const floats = g.end - g.start;
  const ranks = machine.link?.ranks ?? machine.localDevices;
  const computeMs = hookComputeMs(layout, g, hook, machine);
  switch (hook) {
    case 'fp16':
    case 'bf16': {
      const link = machine.link;
      const wire = link
        ? allGatherLinkMs(link, floats * 2)
        : ranks > 1
          ? ((ranks - 1) * floats * 2) / profile.exchangeBytesPerMs
          : 0;
      const wireCpu = link ? linkCpuMs(link, (link.ranks - 1) * floats * 2) : 0;
      return { ms: computeMs + wire, cpuMs: computeMs + wireCpu };
    }
    case 'powersgd': {
      const { plain, p, q } = powerSgdShapes(layout, g, machine.powerSgd);
      const reduce = (n: number): Work => (n > 0 ? plainWork(profile, machine, n * 4) : { ms: 0, cpuMs: 0 });
      const wire = plus(plus(reduce(plain), reduce(p)), reduce(q));
      return { ms: wire.ms + computeMs, cpuMs: wire.cpuMs + computeMs };
    }
  }
}

/**
 * The hook's own compute on group `g` (its kernels' rates, hook-costs.ts), times the hook's scale: what its real
 * exchange on this model's gradient measured at start over what these rates predicted for it (hook-calibration.ts).
 */
export function hookComputeMs(
  layout: ParameterLayout,
  g: ParameterGroup,
  hook: Exclude<HookChoice, 'none'>,
  machine: Machine,
): number {
  const floats = g.end - g.start;
  const ranks = machine.link?.ranks ?? machine.localDevices;
  const c = machine.hookCosts;
  const scale = c.scale?.[hook] ?? 1;
  switch (hook) {
    case 'fp16':
    case 'bf16':
      // the compression with error feedback, then each rank's codes decoded and added (the mean's division included)
      return scale * floats * (c.encodeMsPerFloat + ranks * c.decodeMsPerFloat);
    case 'powersgd': {
      const { macs, residual } = powerSgdShapes(layout, g, machine.powerSgd);
      // error feedback: M + residual, residual = M − P Qᵀ (two passes); the products; Gram-Schmidt on P and Q is small
      return scale * (macs * c.macMs + 2 * residual * c.passMsPerFloat);
    }
  }
}

/** PowerSGD on group `g`: floats sent plain, P's and Q's floats, the products' multiply-adds, the compressed floats. */
function powerSgdShapes(
  layout: ParameterLayout,
  g: ParameterGroup,
  options: Machine['powerSgd'],
): { plain: number; p: number; q: number; macs: number; residual: number } {
  let plain = 0,
    p = 0,
    q = 0,
    macs = 0,
    residual = 0;
  for (const v of layout.variables) {
    if (v.offset < g.start || v.offset >= g.end) continue;
    const m = compressibleShape(v.shape, options.rank, options.minCompressionRate);
    if (!m) {
      plain += v.size;
      continue;
    }
    p += m.rows * m.rank;
    q += m.cols * m.rank;
    macs += 3 * m.rows * m.cols * m.rank;
    residual += m.rows * m.cols;
  }
  return { plain, p, q, macs, residual };
}

/** Per layer (transmission order), the groups holding its parameters (a bucket may split a layer). */
function layerGroups(
  profile: ModelProfile,
  layout: ParameterLayout,
  layerIndex: Map<string, number>,
  groups: readonly ParameterGroup[],
): number[][] {
  const out: Set<number>[] = profile.layers.map(() => new Set());
  for (const v of layout.variables) {
    const i = layerIndex.get(v.layer);
    if (i === undefined) continue;
    groups.forEach((x, g) => {
      if (v.offset < x.end && v.offset + v.size > x.start) out[i].add(g);
    });
  }
  return out.map(s => [...s]);
}

/** `xs` scaled to sum to `total` (as measured on the whole step); unchanged when they sum to 0. */
function scaled(xs: readonly number[], total: number): number[] {
  const sum = xs.reduce((a, b) => a + b, 0);
  return sum > 0 && total > 0 ? xs.map(x => (x * total) / sum) : [...xs];
}
