/**
 * The schedules `--strategy auto` considers, each predicted by the schedule
 * model (schedule-model.ts): strategy (sequential, two-group at the
 * profiler's split, per-layer, buckets) × forward wait (group, step) ×
 * exchange order (ready; priority in chunks of 256K, 1M or 4M floats) × comm
 * hook (none; fp16 and PowerSGD only when compression is allowed: they change
 * the loss). Ranked fastest first; among schedules within TIE of the fastest
 * the simplest (listed first here) wins, so noise does not pick complexity.
 */
import { layoutParameters } from '../model/parameter-layout.js';
import { exchangeGroups, type StrategyName, type StrategyOptions } from '../pipeline/strategy.js';
import type { ModelProfile } from './layer-profile.js';
import { predictSchedule, type HookChoice, type Machine, type OrderChoice } from './schedule-model.js';

export interface Candidate {
  strategy: StrategyName;
  splitLayer?: number;
  forwardWait: 'group' | 'step';
  exchangeOrder: 'ready' | 'priority';
  chunkFloats?: number;
  commHook: HookChoice;
  predictedMs: number;
  /** Process CPU per step the model counts for it (undefined: the profile was not calibrated). */
  cpuMsPerStep?: number;
  /** Whether the CPU ceiling (cpu-ceiling.ts), not the simulated queues, sets `predictedMs`. */
  cpuBound: boolean;
  /** e.g. `two-group/group/priority:1048576/fp16`: how the bench finds a schedule's prediction. */
  key: string;
  /** Enumeration order: lower is simpler. */
  simplicity: number;
}

export const CANDIDATE_CHUNKS = [1 << 18, 1 << 20, 1 << 22];
const STRATEGIES: readonly StrategyName[] = ['sequential', 'two-group', 'per-layer', 'buckets'];
/** Within this fraction of the fastest, the simpler schedule is taken. */
export const TIE = 0.02;

/** The comm hooks auto weighs when compression is allowed (bf16 costs what fp16 costs and rounds coarser). */
export const CANDIDATE_HOOKS = ['fp16', 'powersgd'] as const;

export function candidateKey(
  c: Pick<Candidate, 'strategy' | 'forwardWait' | 'exchangeOrder' | 'chunkFloats' | 'commHook'>,
): string {
  const order = c.exchangeOrder === 'priority' ? `priority:${c.chunkFloats}` : 'ready';
  return `${c.strategy}/${c.forwardWait}/${order}/${c.commHook}`;
}

/**
 * Every candidate, predicted, fastest first. `options.splitLayer`: two-group's p (two-group left out when undefined).
 */
export function rankCandidates(
  profile: ModelProfile,
  machine: Machine,
  options: StrategyOptions,
  allowCompression: boolean,
): Candidate[] {
  const layout = layoutParameters(profile.weights);
  const hooks: HookChoice[] = allowCompression ? ['none', ...CANDIDATE_HOOKS] : ['none'];
  const orders: OrderChoice[] = [
    { order: 'ready' },
    ...CANDIDATE_CHUNKS.map(chunkFloats => ({ order: 'priority' as const, chunkFloats })),
  ];
  const out: Candidate[] = [];
  for (const strategy of STRATEGIES) {
    if (strategy === 'two-group' && options.splitLayer === undefined) continue;
    const groups = exchangeGroups(strategy, layout, options);
    for (const forwardWait of ['group', 'step'] as const) {
      if (groups.length === 1 && forwardWait === 'step') continue; // one group: the same schedule
      for (const exchange of orders) {
        if (exchange.order === 'priority' && groups.length === 1) continue;
        for (const commHook of hooks) {
          if (exchange.order === 'priority' && commHook !== 'none' && exchange.chunkFloats !== CANDIDATE_CHUNKS[0])
            continue; // a hook takes whole groups
          const p = predictSchedule(profile, { strategy, groups, forwardWait, exchange, hook: commHook }, machine);
          const c: Candidate = {
            strategy,
            forwardWait,
            exchangeOrder: exchange.order,
            commHook,
            predictedMs: p.ms,
            cpuMsPerStep: p.cpuMsPerStep,
            cpuBound: p.cpuBound,
            key: '',
            simplicity: out.length,
            ...(strategy === 'two-group' ? { splitLayer: options.splitLayer } : {}),
            ...(exchange.order === 'priority' ? { chunkFloats: exchange.chunkFloats } : {}),
          };
          c.key = candidateKey(c);
          out.push(c);
        }
      }
    }
  }
  return out
    .map((c, i) => ({ c, i }))
    .sort((a, b) => a.c.predictedMs - b.c.predictedMs || a.i - b.i)
    .map(x => x.c);
}

/** The fastest, or the simplest (first enumerated) within TIE of it. */
export function pickCandidate(ranked: readonly Candidate[]): Candidate {
  const best = ranked[0].predictedMs;
  return ranked.filter(c => c.predictedMs <= best * (1 + TIE)).reduce((a, b) => (b.simplicity < a.simplicity ? b : a));
}
