/**
 * `--strategy auto`: profile the model on the devices' engine, take the link
 * (measured across hosts at start: link-probe.ts; an emulated `--link`; or
 * none: shared memory), time the comm hooks' kernels, and pick the schedule
 * the schedule model predicts fastest among the candidates
 * (auto-candidates.ts): strategy, forward wait, exchange order and chunk, and
 * — only with `commHook: 'auto'`, since compression changes the loss — a
 * comm hook. The AlexNet-like verdict gives two-group its split p. Every
 * prediction is held to the CPU ceiling (cpu-ceiling.ts) of this host's share
 * of the machine's cores; the reason says when it binds.
 */
import type { ResolvedConfig, TrainConfig } from '../config-types.js';
import { resolveConfig } from '../config.js';
import { sequentialTrialConfig, strategyOptionsOf } from '../config/check-schedule.js';
import {
  decideAlexNetLike,
  marginSentence,
  parameterisedSplit,
  DEFAULT_CONDITIONS,
  type AlexNetVerdict,
} from './alexnet-like.js';
import { predictStrategies, type Prediction } from './cost-model.js';
import { profileModel, type ProfileOptions, type RunTrial } from './profile-model.js';
import type { ModelProfile } from './layer-profile.js';
import type { StrategyName } from '../pipeline/strategy.js';
import { describeLink, linkOfModel, type LinkCost } from './link-fit.js';
import { measureHookCosts, type HookCosts } from './hook-costs.js';
import { CANDIDATE_HOOKS, pickCandidate, rankCandidates, type Candidate } from './auto-candidates.js';
import type { HookChoice, Machine } from './schedule-model.js';
import { calibrateHookScales } from './hook-calibration.js';
import { lockstepMs } from './lockstep.js';
import { layoutParameters } from '../model/parameter-layout.js';
import { cpuCeilingMs, cpuShareOfHost, describeCpuShare, type CpuShare } from './cpu-ceiling.js';

/** resolveConfig's default global batch. */
const DEFAULT_BATCH = 32;
/** Candidates the reason lists. */
const SHOWN = 5;

export interface AutoChoice {
  strategy: StrategyName;
  splitLayer?: number;
  forwardWait: 'group' | 'step';
  exchangeOrder: 'ready' | 'priority';
  chunkFloats?: number;
  /** Undefined: no hook (the plain all-reduce). */
  commHook?: Exclude<HookChoice, 'none'>;
  predictedMs: number;
  reason: string;
  verdict: AlexNetVerdict;
  /** Every candidate, fastest first. */
  candidates: Candidate[];
  /** The link the prediction used (undefined: one host, shared memory). */
  link?: LinkCost;
  /** This host's share of the machine's cores, which the CPU ceiling divides by. */
  cpu: CpuShare;
  /** The pick's process CPU per step (undefined: not calibrated), and whether the CPU ceiling sets its prediction. */
  cpuMsPerStep?: number;
  cpuBound: boolean;
  predictions: Prediction[];
  profile: ModelProfile;
}

/**
 * `runTrial` runs the profiler's calibration run: the trainer passes its own `train`. Several hosts: this host's
 * devices are profiled in one process (each device's batch as in the run), `measured` is the host link (link-probe.ts),
 * `hostsOnMachine` the host processes on this host's machine (this one included: they share its cores).
 */
export async function chooseStrategy(
  config: TrainConfig,
  runTrial: RunTrial,
  options: ProfileOptions = {},
  measured?: LinkCost,
  hostsOnMachine = 1,
): Promise<AutoChoice> {
  const allowCompression = config.commHook === 'auto';
  const resolved = await resolveConfig(sequentialTrialConfig(withoutAutoHook(config)));
  const profile = await profileModel(thisHostAlone(config), runTrial, options);
  const conditions = {
    timeShare: config.timeShare ?? DEFAULT_CONDITIONS.timeShare,
    paramShare: config.paramShare ?? DEFAULT_CONDITIONS.paramShare,
  };
  const verdict = decideAlexNetLike(profile.layers, conditions);
  const split = verdict.alexnetLike ? parameterisedSplit(profile.layers, verdict.p) : 0;
  const strategyOptions = { ...strategyOptionsOf(config), splitLayer: split > 0 ? split : undefined };
  const predictions = predictStrategies(profile, resolved.devices, strategyOptions, resolved.link);
  const machine = machineOf(config, resolved, measured, hostsOnMachine);
  const { link, cpu } = machine;
  if (allowCompression)
    machine.hookCosts.scale = await calibrateHookScales(layoutParameters(profile.weights), CANDIDATE_HOOKS, machine);
  const candidates = rankCandidates(profile, machine, strategyOptions, allowCompression);
  const best = pickCandidate(candidates);
  const reason = reasonOf({
    best,
    candidates,
    resolved,
    profile,
    cpu,
    machine,
    link,
    allowCompression,
    verdict,
    split,
  });
  return {
    strategy: best.strategy,
    splitLayer: best.splitLayer,
    forwardWait: best.forwardWait,
    exchangeOrder: best.exchangeOrder,
    chunkFloats: best.chunkFloats,
    commHook: best.commHook === 'none' ? undefined : best.commHook,
    predictedMs: best.predictedMs,
    reason,
    verdict,
    candidates,
    link,
    cpu,
    cpuMsPerStep: best.cpuMsPerStep,
    cpuBound: best.cpuBound,
    predictions,
    profile,
  };
}

/** The machine the candidates are predicted on: its devices, the link, the hooks' costs, the CPU share, the hosts. */
function machineOf(
  config: TrainConfig,
  resolved: ResolvedConfig,
  measured: LinkCost | undefined,
  hostsOnMachine: number,
): Machine & { cpu: CpuShare } {
  const link = measured ?? (resolved.link ? linkOfModel(resolved.link, resolved.devices) : undefined);
  const hookOptions = {
    rank: config.commHookOptions?.rank ?? 8,
    minCompressionRate: config.commHookOptions?.minCompressionRate ?? 2,
  };
  return {
    localDevices: resolved.topology.localDevices,
    link,
    hookCosts: measureHookCosts(),
    powerSgd: hookOptions,
    cpu: cpuShareOfHost(hostsOnMachine),
    hosts: resolved.topology.processes,
  };
}

/** Why `best` was chosen, in one line: its prediction, the profile, the machine, the verdict, the runners-up. */
function reasonOf(x: {
  best: Candidate;
  candidates: Candidate[];
  resolved: ResolvedConfig;
  profile: ModelProfile;
  cpu: CpuShare;
  machine: Machine;
  link: LinkCost | undefined;
  allowCompression: boolean;
  verdict: ReturnType<typeof decideAlexNetLike>;
  split: number;
}): string {
  const { best, candidates, resolved, profile, cpu, machine, link, allowCompression, verdict, split } = x;
  const where =
    resolved.topology.processes > 1
      ? ` for ${resolved.devices} devices (${resolved.topology.processes} hosts × ` +
        `${resolved.topology.localDevices}; profiled on this host's ${resolved.topology.localDevices})`
      : '';
  return (
    `${best.key} predicted ${best.predictedMs.toFixed(1)} ms/step${where}` +
    `${best !== candidates[0] ? ` (the simplest within 2% of the fastest, ${candidates[0].key})` : ''}; ` +
    (`profile: forward ${profile.stepForwardMs.toFixed(1)} ms, backward ${profile.stepBackwardMs.toFixed(1)} ms, ` +
      `overhead ${profile.overheadMs.toFixed(1)} ms per step`) +
    (profile.calibration
      ? ` (calibrated ×${profile.calibration.computeScale.toFixed(2)} on a ` +
        `${profile.calibration.steadyStepMs.toFixed(1)} ms real step)`
      : '') +
    '; ' +
    (`${cpuSentence(best, cpu)}; ${lockstepSentence(profile, machine.hosts ?? 1)}link: ` +
      `${link ? describeLink(link) : 'none (shared memory)'}; compression ` +
      (allowCompression
        ? `allowed (--comm-hook auto; ${scaleSentence(machine.hookCosts.scale)})`
        : 'not allowed (--comm-hook auto allows it)') +
      '; ') +
    (`${verdict.alexnetLike ? `AlexNet-like, two-group at p = ${split}` : 'not AlexNet-like, no two-group'} ` +
      `(${verdict.reason}; ${marginSentence(verdict)}); `) +
    `top: ${candidates
      .slice(0, SHOWN)
      .map(c => `${c.key} ${c.predictedMs.toFixed(1)}`)
      .join(', ')} ms`
  );
}

/** `the hooks' compute calibrated on this model's gradient: fp16 ×1.40, powersgd ×1.20`. */
function scaleSentence(scale: HookCosts['scale']): string {
  const parts = Object.entries(scale ?? {}).map(([hook, x]) => `${hook} ×${x.toFixed(2)}`);
  return parts.length > 0
    ? `the hooks' compute calibrated on this model's gradient: ${parts.join(', ')}`
    : "the hooks' compute not calibrated";
}

/**
 * `CPU-bound: 41.6 ms CPU per step on 2 cores shared by 2 hosts (at least 41.6 ms per step)`, or `not CPU-bound: …`.
 */
function cpuSentence(best: Candidate, cpu: CpuShare): string {
  if (best.cpuMsPerStep === undefined) return `CPU per step not measured (no calibration): no CPU ceiling`;
  const per =
    `${best.cpuMsPerStep.toFixed(1)} ms CPU per step on ${describeCpuShare(cpu)} (at least ` +
    `${cpuCeilingMs(best.cpuMsPerStep, cpu).toFixed(1)} ms per step)`;
  return best.cpuBound ? `CPU-bound: ${per}` : `not CPU-bound: ${per}`;
}

/**
 * `hosts in lockstep: +2.3 ms a step for the slowest of 2 (the calibration's steps spread by 4.0 ms); `, or nothing on
 * one host.
 */
function lockstepSentence(profile: ModelProfile, hosts: number): string {
  if (hosts <= 1) return '';
  const spread = profile.calibration?.stepSpreadMs;
  if (spread === undefined)
    return 'hosts in lockstep: the wait for the slowest not counted (no calibrated step spread); ';
  return (
    `hosts in lockstep: +${lockstepMs(spread, hosts).toFixed(1)} ms a step for the slowest of ${hosts} (the ` +
    `calibration's steps spread by ${spread.toFixed(1)} ms); `
  );
}

/**
 * The run as one process of this host's devices alone, each with the batch it trains in the run (no hosts, no
 * rendezvous, its own transport).
 */
function thisHostAlone(config: TrainConfig): TrainConfig {
  const hosts = config.hosts ?? 1;
  const base = withoutAutoHook(config);
  if (hosts === 1) return base;
  const { hosts: _hosts, hostRank: _rank, rendezvous: _rendezvous, transport: _transport, ...alone } = base;
  void _hosts;
  void _rank;
  void _rendezvous;
  void _transport;
  return { ...alone, batch: (config.batch ?? DEFAULT_BATCH) / hosts };
}

/** `commHook: 'auto'` is auto's to resolve: profile (and check) without a hook, and without its options. */
export function withoutAutoHook(config: TrainConfig): TrainConfig {
  if (config.commHook !== 'auto') return config;
  const { commHook: _hook, commHookOptions: _options, ...rest } = config;
  void _hook;
  void _options;
  return rest;
}
