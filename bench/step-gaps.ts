/**
 * Where a device's compute thread spends a step, from its spans: the step
 * period, the time inside spans (load, forward, wait, backward, handoff), and
 * the gap between one step's last span and the next step's first — the time
 * the thread waits for the next step to be posted (one host: the main thread
 * posts step s+1 while step s trains, so the gap is the thread's own hand-over
 * and any preemption; several hosts, or around a checkpoint: once every device
 * of the process has reported the step done). The scaling bench compares (c)
 * and (d) with it.
 *
 * @example
 * computeThreadSteps(spans, 0, 20) // { steps: 80, periodMs: 35.6, busyMs: 31.7, gapMs: 3.9 }
 */
import type { Span } from '../src/index.js';

export interface ComputeThreadSteps {
  steps: number;
  periodMs: number;
  busyMs: number;
  gapMs: number;
}

/** Per step of `device` after step `after` (the warm-up): means over the steps. Undefined with fewer than 2 steps. */
export function computeThreadSteps(
  spans: readonly Span[],
  device: number,
  after: number,
): ComputeThreadSteps | undefined {
  // A group's backward span repeats part of the step's backward (the timeline draws one of them).
  const mine = spans
    .filter(
      s =>
        s.device === device &&
        s.thread === 'compute' &&
        s.step > after &&
        !(s.kind === 'backward' && s.group !== undefined),
    )
    .sort((a, b) => a.start - b.start);
  const steps = [...new Set(mine.map(s => s.step))].sort((a, b) => a - b);
  if (steps.length < 2) return undefined;
  let busy = 0,
    gap = 0;
  for (let i = 0; i < mine.length; i++) {
    busy += mine[i].end - mine[i].start;
    if (i > 0 && mine[i].step !== mine[i - 1].step) gap += Math.max(0, mine[i].start - mine[i - 1].end);
  }
  const starts = stepStarts(mine);
  const periodMs = (starts[starts.length - 1] - starts[0]) / (steps.length - 1);
  return { steps: steps.length, periodMs, busyMs: busy / steps.length, gapMs: gap / (steps.length - 1) };
}

/**
 * Each step's duration after step `after` (the warm-up) on `device`'s compute thread: from its start to the next step's
 * start.
 */
export function stepPeriods(spans: readonly Span[], device: number, after: number): number[] {
  const starts = stepStarts(spans.filter(s => s.device === device && s.thread === 'compute' && s.step > after));
  return starts.slice(1).map((start, i) => start - starts[i]);
}

/** The start of each step's first span, in step order (`spans` of one thread). */
function stepStarts(spans: readonly Span[]): number[] {
  const first = new Map<number, number>();
  for (const s of spans) first.set(s.step, Math.min(first.get(s.step) ?? Infinity, s.start));
  return [...first.entries()].sort((p, q) => p[0] - q[0]).map(([, start]) => start);
}
