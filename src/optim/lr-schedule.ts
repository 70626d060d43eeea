/**
 * Learning-rate schedules: the learning rate of each step as a pure function of the step number (never of state), so
 * every device of every host computes the same value, and a run resumed from a checkpoint continues the schedule
 * exactly. A warm-up (linear from a fraction of the learning rate, 0 by default) then constant, step, exponential,
 * cosine or linear decay over the run's remaining steps; or, in the library, a function of (step, epoch) evaluated
 * once per step on the main thread into a table every thread receives.
 */
import { createHash } from 'node:crypto';
import { bad, shown } from '../config-checks.js';
import type { FlatArithmetic } from './flat-arithmetic.js';

/** A user's function schedule: `step` counts the updates before this one (0 first), `epoch` from 0 (as tfjs's). */
export type LrFunction = (step: number, epoch: number) => number;

export const LR_SCHEDULE_KINDS = ['constant', 'step', 'exponential', 'cosine', 'linear'] as const;

/** What every thread receives: plain data (a function's values tabulated). */
export type LrSchedule = {
  warmupSteps: number;
  /** The warm-up starts at this fraction of the learning rate. */
  warmupFrom: number;
} & (
  | { kind: 'constant' }
  | { kind: 'step' | 'exponential'; every: number; gamma: number }
  /** `steps`: the run's (or `lrScheduleSteps`); the decay reaches `floor` after the last. */
  | { kind: 'cosine' | 'linear'; floor: number; steps: number }
  | { kind: 'function'; lrs: number[]; digest: string }
);

/** The schedule options of a train config, as given. */
export interface LrScheduleFields {
  lrSchedule?: string | LrFunction;
  warmupSteps?: number;
  warmupFrom?: number;
  lrScheduleSteps?: number;
}

/** One number of a `--lr-schedule` text, checked. */
function part(text: string | undefined, what: string, ok: (n: number) => boolean, spec: string): number {
  const n = text === undefined || text.trim() === '' ? NaN : Number(text);
  if (!Number.isFinite(n) || !ok(n)) bad('lrSchedule', `${what} in '${spec}' is ${shown(text)}: ${SYNTAX}`);
  return n;
}

const SYNTAX =
  'the schedules are constant, step:EVERY:GAMMA, exponential:EVERY:GAMMA, cosine[:FLOOR], linear[:FLOOR] ' +
  '(EVERY steps > 0, 0 < GAMMA <= 1, FLOOR an lr >= 0)';

/** A schedule without its warm-up: the decay alone. */
type Decay = LrSchedule extends infer S ? (S extends unknown ? Omit<S, 'warmupSteps' | 'warmupFrom'> : never) : never;

/** The decay a `--lr-schedule` text names (`step:1000:0.5`, `cosine:1e-5`). */
function parseSpec(spec: string, lr: number, steps: number): Decay {
  const [kind, ...rest] = spec.split(':');
  const arity = { constant: [0, 0], step: [2, 2], exponential: [2, 2], cosine: [0, 1], linear: [0, 1] }[kind];
  if (!arity) bad('lrSchedule', `'${spec}' is not a schedule: ${SYNTAX}`);
  if (rest.length < arity[0] || rest.length > arity[1])
    bad('lrSchedule', `'${spec}' gives ${rest.length} value(s) to ${kind}: ${SYNTAX}`);
  if (kind === 'step' || kind === 'exponential') {
    const every = part(rest[0], 'EVERY', n => Number.isInteger(n) && n > 0, spec);
    return { kind, every, gamma: part(rest[1], 'GAMMA', n => n > 0 && n <= 1, spec) };
  }
  if (kind === 'cosine' || kind === 'linear') {
    const floor = rest.length === 0 ? 0 : part(rest[0], 'FLOOR', n => n >= 0, spec);
    if (floor > lr) bad('lrSchedule', `FLOOR ${floor} in '${spec}' is above the learning rate ${lr}: ${SYNTAX}`);
    return { kind, floor, steps };
  }
  return { kind: 'constant' };
}

/** A function schedule's value at every step the schedule spans, each checked finite and >= 0. */
function tabulate(fn: LrFunction, steps: number, stepsPerEpoch: number): number[] {
  const lrs: number[] = [];
  for (let k = 0; k < steps; k++) {
    let lr: unknown;
    try {
      lr = fn(k, Math.floor(k / stepsPerEpoch));
    } catch (err) {
      bad('lrSchedule', `the function threw at step ${k}: ${(err as Error)?.message ?? String(err)}`);
    }
    if (typeof lr !== 'number' || !Number.isFinite(lr) || lr < 0)
      bad('lrSchedule', `the function returned ${shown(lr)} at step ${k}: it must return a finite number >= 0`);
    lrs.push(lr);
  }
  return lrs;
}

/**
 * The run's schedule, or undefined when the learning rate is constant (no schedule, no warm-up): checkpoints and host
 * flags of such a run stay as they were.
 */
export function resolveLrSchedule(
  config: LrScheduleFields,
  lr: number,
  steps: number,
  stepsPerEpoch: number,
): LrSchedule | undefined {
  const warmupSteps = config.warmupSteps ?? 0,
    warmupFrom = config.warmupFrom ?? 0;
  const spec = config.lrSchedule ?? 'constant';
  steps = config.lrScheduleSteps ?? steps; // fit trains epoch by epoch: the schedule spans all of them
  if (config.warmupFrom !== undefined && warmupSteps === 0) bad('warmupFrom', 'needs warmupSteps > 0');
  if (typeof spec === 'function') {
    if (warmupSteps > 0) bad('warmupSteps', 'does not apply to a function schedule: the function gives every step');
    const lrs = tabulate(spec, steps, stepsPerEpoch);
    const digest = createHash('sha256').update(new Float64Array(lrs)).digest('hex').slice(0, 16);
    return { kind: 'function', lrs, digest, warmupSteps, warmupFrom };
  }
  if (typeof spec !== 'string') bad('lrSchedule', `must be a schedule's text or a function, got ${shown(spec)}`);
  const decay = parseSpec(spec, lr, steps);
  if (config.lrScheduleSteps !== undefined && !spansSteps(spec))
    bad(
      'lrScheduleSteps',
      `applies to the cosine and linear schedules (and a function schedule) only, not '${spec}', whose learning ` +
        `rate does not depend on the steps it spans: remove lrScheduleSteps, or give lrSchedule cosine or linear`,
    );
  if (decay.kind === 'constant' && warmupSteps === 0) return undefined;
  if (warmupSteps >= steps && (decay.kind === 'cosine' || decay.kind === 'linear'))
    bad('warmupSteps', `is ${warmupSteps}, not below the run's ${steps} steps: nothing would be left to decay`);
  return { ...decay, warmupSteps, warmupFrom } as LrSchedule;
}

/** Whether schedule `spec` (default constant) spans `lrScheduleSteps`: a function, cosine or linear decay. */
export function spansSteps(spec: LrScheduleFields['lrSchedule']): boolean {
  return typeof spec === 'function' || (typeof spec === 'string' && /^(cosine|linear)(:|$)/.test(spec));
}

/** The schedule as checkpoints and host flags compare it: a function's values by their digest. */
export function scheduleIdentity(s: LrSchedule | undefined): object | undefined {
  if (s?.kind !== 'function') return s;
  const { lrs, ...rest } = s;
  void lrs;
  return rest;
}

/** The learning rate of step `step` (from 1, as the run counts), `lr` the optimizer's. */
export function lrAt(s: LrSchedule | undefined, lr: number, step: number): number {
  if (!s) return lr;
  const k = step - 1; // updates before this one
  if (s.kind === 'function') return s.lrs[Math.min(k, s.lrs.length - 1)];
  if (k < s.warmupSteps) return lr * (s.warmupFrom + ((1 - s.warmupFrom) * (k + 1)) / s.warmupSteps);
  const t = k - s.warmupSteps;
  switch (s.kind) {
    case 'constant':
      return lr;
    case 'step':
      return lr * Math.pow(s.gamma, Math.floor(t / s.every));
    case 'exponential':
      return lr * Math.pow(s.gamma, t / s.every);
    case 'cosine':
    case 'linear': {
      const p = Math.min(1, t / Math.max(1, s.steps - s.warmupSteps));
      const share = s.kind === 'cosine' ? 0.5 * (1 + Math.cos(Math.PI * p)) : 1 - p;
      return s.floor + (lr - s.floor) * share;
    }
    default: {
      const never: never = s;
      return never;
    }
  }
}

/** `arithmetic` updating with the scheduled learning rate of each step (the JS loops and the addon's alike). */
export function scheduledArithmetic(arithmetic: FlatArithmetic, s: LrSchedule | undefined): FlatArithmetic {
  if (!s) return arithmetic;
  return {
    name: arithmetic.name,
    reduceMeanInto: (...args) => arithmetic.reduceMeanInto(...args),
    applyUpdate(config, params, grads, state, start, end, step) {
      const scheduled = { ...config, lr: lrAt(s, config.lr, step) };
      arithmetic.applyUpdate(scheduled, params, grads, state, start, end, step);
    },
    ...(arithmetic.castToBf16 ? { castToBf16: arithmetic.castToBf16.bind(arithmetic) } : {}),
  };
}
