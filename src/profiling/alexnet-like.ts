/**
 * The AlexNet-like decision of seed 000 (claims 8-10), as a pure function.
 *
 * How the seed's two open conditions are read here:
 * 1. Walk the m layers in transmission order (output layer first),
 *    accumulating compute time (forward + backward). p is the last layer for
 *    which the time of layers 1..p, as a share of the whole, is still
 *    <= `timeShare`: the walk stops before the first layer that would break it.
 * 2. The remaining layers p+1..m must hold <= `paramShare` of all parameters.
 * Both hold -> AlexNet-like: layers 1..p are the FC group, p+1..m the conv group.
 *
 * Defaults 0.25 / 0.25: the seed's own picture is ~20% of compute and ~90% of
 * parameters in the FC layers; 0.25 accepts that with margin, and a network
 * whose cheap top layers leave more than a quarter of the parameters behind
 * would gain little from exchanging the top group early.
 */
import type { LayerCost } from './layer-profile.js';
import { layerTimeMs } from './layer-profile.js';

export interface AlexNetConditions {
  /** Condition 1: the FC group's share of compute time is at most this. */
  timeShare: number;
  /** Condition 2: the conv group's share of parameters is at most this. */
  paramShare: number;
}

export const DEFAULT_CONDITIONS: AlexNetConditions = { timeShare: 0.25, paramShare: 0.25 };

export interface AlexNetVerdict {
  alexnetLike: boolean;
  /** Number of layers (transmission order) in the FC group. */
  p: number;
  fcGroup: string[];
  convGroup: string[];
  /** Compute-time share of layers 1..p. */
  fcTimeShare: number;
  /** Parameter share of layers p+1..m. */
  convParamShare: number;
  conditions: AlexNetConditions;
  /** How far the measured quantities are from changing the verdict (and p). */
  margin: DecisionMargin;
  /** Why, in one sentence; for a negative verdict: which condition failed and by how much. */
  reason: string;
}

/**
 * The decision's margin. Only compute times are measured (parameter counts are
 * exact), and they enter through the cumulative time shares c(k) of the top k
 * layers: p is the number of k with c(k) <= timeShare. The verdict flips only
 * if p moves to some q whose verdict differs, which needs c(q) to fall to the
 * threshold (q > p) or c(q + 1) to rise above it (q < p). `time` is the
 * smallest such distance, in shares of compute (0.05 = 5 points).
 */
export interface DecisionMargin {
  /**
   * Distance of the nearest verdict-flipping cumulative share from `timeShare`; null when no timing can flip the
   * verdict.
   */
  time: number | null;
  /** That cumulative share: the top `layers` layers, down to `layer`, take `share` of compute now. */
  nearestFlip?: { layers: number; layer: string; share: number };
  /**
   * Distance of c(p) or c(p + 1) from `timeShare`, whichever is nearer: how far p is from moving (the split, not the
   * verdict).
   */
  split: number | null;
  /** `paramShare` − the conv group's parameter share: exact; negative when condition 2 failed. */
  parameters: number;
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const points = (x: number) => `${(x * 100).toFixed(1)} points`;

export function decideAlexNetLike(
  layers: readonly LayerCost[],
  conditions: AlexNetConditions = DEFAULT_CONDITIONS,
): AlexNetVerdict {
  const m = layers.length;
  const totalTime = layers.reduce((s, l) => s + layerTimeMs(l), 0);
  const totalParams = layers.reduce((s, l) => s + l.parameters, 0);
  const { p, time } = cheapTopLayers(layers, totalTime, conditions.timeShare);
  const fcTimeShare = totalTime > 0 ? time / totalTime : 0;
  const convParams = layers.slice(p).reduce((s, l) => s + l.parameters, 0);
  const convParamShare = totalParams > 0 ? convParams / totalParams : 0;
  const margin = decisionMargin(layers, p, conditions);
  const base = {
    p,
    fcGroup: layers.slice(0, p).map(l => l.name),
    convGroup: layers.slice(p).map(l => l.name),
    fcTimeShare,
    convParamShare,
    conditions,
    margin,
  };
  if (m === 0) return { ...base, alexnetLike: false, reason: 'the model has no layers' };
  if (p === 0) {
    const share = totalTime > 0 ? layerTimeMs(layers[0]) / totalTime : 0;
    return {
      ...base,
      alexnetLike: false,
      reason:
        `condition 1 failed: the output layer ${layers[0].name} alone takes ${pct(share)} of compute, ` +
        `over the ${pct(conditions.timeShare)} limit by ${pct(share - conditions.timeShare)}`,
    };
  }
  if (p === m)
    return {
      ...base,
      alexnetLike: false,
      reason: `all ${m} layers fit in the ${pct(conditions.timeShare)} time share: no layer is left for a conv group`,
    };
  if (convParamShare > conditions.paramShare) {
    return {
      ...base,
      alexnetLike: false,
      reason:
        `condition 2 failed: after the top ${p} layer(s) (${pct(fcTimeShare)} of compute) the remaining ${m - p} ` +
        `layers hold ` +
        (`${pct(convParamShare)} of the parameters, over the ${pct(conditions.paramShare)} limit by ` +
          `${pct(convParamShare - conditions.paramShare)}`),
    };
  }
  return {
    ...base,
    alexnetLike: true,
    reason:
      `the top ${p} layer(s) take ${pct(fcTimeShare)} of compute (<= ${pct(conditions.timeShare)}) ` +
      `and the remaining ${m - p} hold ${pct(convParamShare)} of the parameters (<= ${pct(conditions.paramShare)})`,
  };
}

/** p: the last layer (transmission order) for which the time of layers 1..p over the total meets `timeShare`. */
function cheapTopLayers(layers: readonly LayerCost[], totalTime: number, timeShare: number) {
  let p = 0,
    time = 0;
  while (p < layers.length) {
    const next = time + layerTimeMs(layers[p]);
    if (totalTime > 0 && next / totalTime > timeShare) break;
    time = next;
    p++;
  }
  return { p, time };
}

/** The verdict if p were `q`: both conditions, as decideAlexNetLike applies them. */
function verdictAt(layers: readonly LayerCost[], q: number, paramShare: number): boolean {
  const m = layers.length;
  if (q < 1 || q >= m) return false;
  const total = layers.reduce((s, l) => s + l.parameters, 0);
  const conv = layers.slice(q).reduce((s, l) => s + l.parameters, 0);
  return (total > 0 ? conv / total : 0) <= paramShare;
}

export function decisionMargin(layers: readonly LayerCost[], p: number, conditions: AlexNetConditions): DecisionMargin {
  const m = layers.length;
  const total = layers.reduce((s, l) => s + layerTimeMs(l), 0);
  const totalParams = layers.reduce((s, l) => s + l.parameters, 0);
  const convShare = totalParams > 0 ? layers.slice(p).reduce((s, l) => s + l.parameters, 0) / totalParams : 0;
  const parameters = conditions.paramShare - convShare;
  if (m === 0 || total <= 0) return { time: null, split: null, parameters };
  const c = [0];
  for (const l of layers) c.push(c[c.length - 1] + layerTimeMs(l) / total);
  const T = conditions.timeShare;
  const now = verdictAt(layers, p, conditions.paramShare);
  const flips: { distance: number; k: number }[] = [];
  for (let q = 0; q <= m; q++) {
    if (q === p || verdictAt(layers, q, conditions.paramShare) === now) continue;
    const k = q > p ? q : q + 1; // the cumulative share that must cross the threshold
    flips.push({ distance: Math.abs(c[k] - T), k });
  }
  const nearest = flips.sort((a, b) => a.distance - b.distance)[0];
  const splitDistances = [p >= 1 ? T - c[p] : Infinity, p < m ? c[p + 1] - T : Infinity].filter(Number.isFinite);
  return {
    time: nearest ? nearest.distance : null,
    nearestFlip: nearest && { layers: nearest.k, layer: layers[nearest.k - 1].name, share: c[nearest.k] },
    split: splitDistances.length > 0 ? Math.min(...splitDistances) : null,
    parameters,
  };
}

/** The margin in one sentence, for reports. */
export function marginSentence(v: AlexNetVerdict): string {
  const { time, nearestFlip, split } = v.margin;
  const T = pct(v.conditions.timeShare);
  const splitPart = split === null ? '' : `; p itself is ${points(split)} from moving`;
  if (time === null || !nearestFlip)
    return `margin: no measured time can change this verdict (every split gives the same answer)${splitPart}`;
  const cross = nearestFlip.share > v.conditions.timeShare ? `fell to ${T}` : `rose above ${T}`;
  return (
    `margin ${points(time)} of compute: the verdict flips if the top ${nearestFlip.layers} layer(s), down to ` +
    `${nearestFlip.layer}, ` +
    `${cross} (now ${pct(nearestFlip.share)})${splitPart}`
  );
}

/** The two-group split in parameterised layers: how many layers with parameters are among the FC group. */
export function parameterisedSplit(layers: readonly LayerCost[], p: number): number {
  return layers.slice(0, p).filter(l => l.parameters > 0).length;
}
