/** The learning-rate schedule section of a train config: the schedule, and the warm-up before it (lr-schedule.ts). */
import type { OptionTable } from '../options/declaration.js';
import { finiteIn, nonNegativeInt, positiveInt } from '../options/option-checks.js';
import { bad, shown } from '../config-checks.js';
import type { LrScheduleFields } from './lr-schedule.js';

export type LrScheduleOptions = LrScheduleFields;

function scheduleSpec(v: unknown, field: string): NonNullable<LrScheduleFields['lrSchedule']> {
  if (typeof v !== 'string' && typeof v !== 'function')
    bad(
      field,
      `must be a schedule's text (cosine, step:1000:0.5, …) or a function (step, epoch) => lr, got ${shown(v)}`,
    );
  return v as NonNullable<LrScheduleFields['lrSchedule']>;
}

export const LR_SCHEDULE_OPTIONS: OptionTable<LrScheduleOptions> = {
  lrSchedule: {
    kind: 'string',
    group: 'optimizer',
    hosts: 'same',
    arg: 'SCHEDULE',
    default: 'constant',
    doc:
      'after any warm-up: constant, step:EVERY:GAMMA, exponential:EVERY:GAMMA, cosine[:FLOOR] or linear[:FLOOR] ' +
      "to FLOOR over the run's steps; the library also takes a function (step, epoch) => lr",
    check: scheduleSpec,
  },
  warmupSteps: {
    kind: 'integer',
    group: 'optimizer',
    hosts: 'same',
    arg: 'N',
    default: '0',
    doc: 'the first N steps raise the learning rate linearly to lr (step k of N, from 1: lr × k / N)',
    check: nonNegativeInt('0: no warm-up'),
  },
  warmupFrom: {
    kind: 'real',
    group: 'optimizer',
    hosts: 'same',
    arg: 'F',
    default: '0',
    doc: 'the warm-up starts from this fraction of lr instead of 0',
    check: finiteIn(0, 1),
  },
  lrScheduleSteps: {
    kind: 'integer',
    group: 'optimizer',
    hosts: 'same',
    arg: 'N',
    default: "the run's steps",
    doc: 'the steps cosine and linear decay (and a function schedule) span; a longer run keeps the last lr',
    check: positiveInt(),
  },
};
