/**
 * What lockstep alone costs two devices on this machine, from the ceiling's own
 * runs. (d) is two one-device trainings at once: each steps at its own pace,
 * and its step times spread (the cores are shared by ~8 threads). Two devices
 * of one run cannot: every step's exchange needs both, so a step of (c) lasts
 * at least as long as the slower device's. Paired step for step, with (d)'s
 * step times and nothing else added (no exchange, no update), two devices in
 * lockstep would step every E[max(a_i, b_j)] ms, where a and b are the two
 * trainings' step times and the pairs run over every i, j (the two spread
 * independently); (d) makes 1/mean(a) + 1/mean(b) steps a millisecond between
 * them. Their ratio is the (c)/(d) a synchronous data-parallel schedule gets
 * from lockstep alone, if its devices' steps spread as (d)'s do and
 * independently: the scaling bench prints it beside the measured (c)/(d). It
 * is an estimate, not a strict bound: part of (d)'s spread is its two
 * trainings taking cores from each other, which devices in lockstep partly
 * avoid, so a (c)/(d) at or above it says the exchange and update add nothing
 * beyond lockstep. Its model form is `lockstepMs` (src/profiling/lockstep.ts):
 * for normal step times of spread σ, E[max] = mean + e(2)·σ.
 *
 * @example
 * lockstepBound([40, 50, 40, 50], [45, 45, 45, 45]).bound // 0.947: paired steps of 47.5 ms against means of 45
 */
import { spreadOf } from '../src/profiling/lockstep.js';

export interface LockstepBound {
  /** Each training's mean step, ms. */
  meanMs: [number, number];
  /** Each training's step spread (standard deviation) over its mean. */
  spread: [number, number];
  /** The mean over every pair (i, j) of max(a_i, b_j): a step of the two in lockstep, ms. */
  pairedStepMs: number;
  /** (2 / pairedStepMs) / (1/mean(a) + 1/mean(b)): the (c)/(d) lockstep alone leaves. */
  bound: number;
}

const mean = (xs: readonly number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;

/** The steps' spread (spreadOf: the sample standard deviation; 0 for one step) over their mean. */
function spreadOverMean(xs: readonly number[]): number {
  return (spreadOf(xs) ?? 0) / mean(xs);
}

/** The lockstep estimate of two trainings whose step times (ms) were `a` and `b`; undefined if either has none. */
export function lockstepBound(a: readonly number[], b: readonly number[]): LockstepBound | undefined {
  if (a.length === 0 || b.length === 0) return undefined;
  // Sorted b with its suffix sums: for each a_i, the pairs with b_j > a_i add b_j, the rest add a_i. O(n log n).
  const sorted = [...b].sort((x, y) => x - y);
  const suffix = new Float64Array(sorted.length + 1);
  for (let j = sorted.length - 1; j >= 0; j--) suffix[j] = suffix[j + 1] + sorted[j];
  let total = 0;
  for (const x of a) {
    let lo = 0,
      hi = sorted.length; // first index with sorted[j] > x
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (sorted[mid] > x) hi = mid;
      else lo = mid + 1;
    }
    total += x * lo + suffix[lo];
  }
  const pairedStepMs = total / (a.length * b.length);
  const meanMs: [number, number] = [mean(a), mean(b)];
  return {
    meanMs,
    spread: [spreadOverMean(a), spreadOverMean(b)],
    pairedStepMs,
    bound: 2 / pairedStepMs / (1 / meanMs[0] + 1 / meanMs[1]),
  };
}
