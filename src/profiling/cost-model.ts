/**
 * Predicts a strategy's step time from a profile as a simulated timeline of
 * the two queues of a device: the compute queue runs forward, then backward
 * layer by layer in transmission order; each exchange group becomes ready
 * when backward has passed its last layer; the comm queue takes groups in
 * order, each for max(shared-memory all-reduce, link wire time) plus the
 * optimizer update. The next step starts when both queues are done.
 */
import { layoutParameters, type ParameterGroup } from '../model/parameter-layout.js';
import { exchangeGroups, type StrategySpec, type StrategyOptions } from '../pipeline/strategy.js';
import { allReduceWireMs, type LinkModel } from '../pipeline/link-model.js';
import type { ModelProfile } from './layer-profile.js';

export interface GroupTimeline {
  name: string;
  bytes: number;
  readyMs: number;
  startMs: number;
  endMs: number;
}

export interface Prediction {
  strategy: string;
  stepMs: number;
  computeMs: number;
  commMs: number;
  /** max(compute, comm) + overhead: no schedule can beat it. */
  lowerBoundMs: number;
  groups: GroupTimeline[];
}

export function predictStep(
  profile: ModelProfile,
  groups: readonly ParameterGroup[],
  devices: number,
  link?: LinkModel,
  strategy = 'custom',
): Prediction {
  const layout = layoutParameters(profile.weights);
  const layerOrder = new Map(profile.layers.map((l, i) => [l.name, i]));
  // Time at which backward has passed layer i (transmission order).
  const passed: number[] = [];
  let t = profile.stepForwardMs;
  for (const l of profile.layers) {
    t += l.backwardMs;
    passed.push(t);
  }
  const computeMs = t;
  let free = 0,
    commMs = 0;
  const timeline: GroupTimeline[] = groups.map(g => {
    let last = -1;
    for (const v of layout.variables) {
      if (v.offset >= g.start && v.offset < g.end)
        last = Math.max(last, layerOrder.get(v.layer) ?? profile.layers.length - 1);
    }
    const readyMs = last < 0 ? computeMs : passed[last];
    const bytes = (g.end - g.start) * 4;
    const memoryMs = devices > 1 ? (2 * bytes) / devices / profile.exchangeBytesPerMs : 0;
    const exchangeMs = Math.max(memoryMs, link ? allReduceWireMs(link, bytes, devices) : 0);
    const durationMs = exchangeMs + bytes / profile.updateBytesPerMs;
    const startMs = Math.max(readyMs, free);
    free = startMs + durationMs;
    commMs += durationMs;
    return { name: g.name, bytes, readyMs, startMs, endMs: free };
  });
  return {
    strategy,
    stepMs: Math.max(computeMs, free) + profile.overheadMs,
    computeMs,
    commMs,
    lowerBoundMs: Math.max(computeMs, commMs) + profile.overheadMs,
    groups: timeline,
  };
}

export const PREDICTED_STRATEGIES = ['sequential', 'two-group', 'per-layer', 'buckets'] as const;

/** Predictions for the built-in strategies (two-group at `options.splitLayer` when given). */
export function predictStrategies(
  profile: ModelProfile,
  devices: number,
  options: StrategyOptions,
  link?: LinkModel,
  strategies: readonly StrategySpec[] = PREDICTED_STRATEGIES,
): Prediction[] {
  const layout = layoutParameters(profile.weights);
  return strategies.map(s =>
    predictStep(profile, exchangeGroups(s, layout, options), devices, link, typeof s === 'string' ? s : s.name),
  );
}
