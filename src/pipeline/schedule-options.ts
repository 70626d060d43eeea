/** The schedule section of a train config: batch and steps, the strategy, and how exchanges are ordered. */
import type { OptionTable } from '../options/declaration.js';
import { choice, finiteIn, positiveInt } from '../options/option-checks.js';
import { bad, shown } from '../config-checks.js';
import { STRATEGIES, type StrategySpec } from './strategy.js';
import { EXCHANGE_ORDERS } from './priority-schedule.js';

export interface ScheduleOptions {
  /** Global batch size: each device trains on batch / devices samples per step. */
  batch?: number;
  /**
   * Gradient accumulation: each device trains its batch / devices samples as this many micro-batches, one after the
   * other, and exchanges their mean gradient once; the global batch is unchanged, memory is a micro-batch's.
   */
  accumulate?: number;
  steps?: number;
  epochs?: number;
  seed?: number;
  /** A built-in strategy name, `auto`, or a `CustomStrategy` (library API only). Default `sequential`. */
  strategy?: StrategySpec | 'auto';
  /** `auto` (profile, then decide): the AlexNet-like conditions. Defaults 0.25 and 0.25. */
  timeShare?: number;
  paramShare?: number;
  /** two-group: number of layers (transmission order) in the FC group. */
  splitLayer?: number;
  /** buckets: bucket cap and first-bucket cap in MB. */
  bucketCapMB?: number;
  firstBucketMB?: number;
  /** EMULATED link between devices, e.g. `1gbps` or `10gbps:0.05ms`. */
  link?: string;
  /**
   * How the comm thread orders a step's exchanges: `ready` (default: one group after the other, as they become ready)
   * or `priority` (each group's all-reduce in chunks of `chunkFloats`; between chunks a group forward needs earlier
   * overtakes; the same parameters, bit for bit). See pipeline/priority-schedule.ts.
   */
  exchangeOrder?: 'ready' | 'priority';
  /** `priority`: floats per chunk of a group's all-reduce. Default 1048576 (4 MiB). */
  chunkFloats?: number;
  /**
   * BatchNormalization in training: `sync` (default) normalises with the statistics of the global batch (a collective
   * inside forward and backward), so N devices give what one engine gives; `local` uses each device's own batch
   * (PyTorch DDP's default, faster, not equal to one engine) and averages the moving statistics after every step.
   */
  batchNorm?: 'sync' | 'local';
  /**
   * When the next forward waits for the previous step's update: `group` (default) just before the first layer that
   * uses each exchange group, `step` before forward starts, for every group at once. The same bits either way; `step`
   * is for a custom layer that reads a weight another layer holds (tandem cannot see that read).
   */
  forwardWait?: 'group' | 'step';
}

function seed(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
    bad(field, `must be a non-negative integer, got ${shown(v)}`);
  return v;
}

export const SCHEDULE_OPTIONS: OptionTable<ScheduleOptions> = {
  batch: {
    kind: 'integer',
    group: 'schedule',
    hosts: 'same',
    arg: 'GLOBAL',
    default: '32',
    doc: 'global batch over every device of every host',
    check: positiveInt(),
  },
  accumulate: {
    kind: 'integer',
    group: 'schedule',
    hosts: 'same',
    arg: 'N',
    default: '1',
    doc: 'N micro-batches of batch/(devices×N) per step, one exchange of their mean gradient (batch divisible by both)',
    check: positiveInt(4096),
  },
  steps: {
    kind: 'integer',
    group: 'schedule',
    hosts: 'same',
    default: 'one epoch',
    doc: 'training steps (or --epochs)',
  },
  epochs: {
    kind: 'integer',
    group: 'schedule',
    hosts: 'same',
    doc: 'epochs instead of steps',
    check: positiveInt(1_000_000),
  },
  seed: {
    kind: 'integer',
    group: 'schedule',
    hosts: 'same',
    default: '1',
    doc: 'initial values, sampling and data order',
    check: seed,
  },
  strategy: {
    kind: 'string',
    group: 'schedule',
    hosts: 'same',
    choices: [...STRATEGIES, 'auto'],
    default: 'per-layer on one device with two or more CPUs, else sequential',
    doc: 'auto profiles first, then runs the schedule the cost model predicts fastest',
  },
  timeShare: {
    kind: 'real',
    group: 'schedule',
    hosts: "own: auto profiles on host 0, and every host takes host 0's choice",
    default: '0.25',
    doc: 'auto, profile: the AlexNet-like compute-time condition',
    check: finiteIn(0, 1),
  },
  paramShare: {
    kind: 'real',
    group: 'schedule',
    hosts: "own: auto profiles on host 0, and every host takes host 0's choice",
    default: '0.25',
    doc: 'auto, profile: the AlexNet-like parameter condition',
    check: finiteIn(0, 1),
  },
  splitLayer: {
    kind: 'integer',
    group: 'schedule',
    hosts: 'same',
    arg: 'P',
    doc: 'two-group: layers (transmission order) in the FC group',
    check: positiveInt(),
  },
  bucketCapMB: {
    kind: 'real',
    group: 'schedule',
    hosts: 'same',
    flag: 'bucket-mb',
    arg: 'MB',
    default: '0.5',
    doc: 'buckets: bucket cap',
    check: finiteIn(1e-6, 1e6),
  },
  firstBucketMB: {
    kind: 'real',
    group: 'schedule',
    hosts: 'same',
    flag: 'first-bucket-mb',
    arg: 'MB',
    default: '0.125',
    doc: 'buckets: first-bucket cap',
    check: finiteIn(1e-6, 1e6),
  },
  link: {
    kind: 'string',
    group: 'schedule',
    hosts: 'same',
    arg: 'BANDWIDTH[:LATENCY]',
    doc: 'EMULATED link between devices, e.g. 1gbps, 10gbps:0.05ms',
  },
  exchangeOrder: {
    kind: 'string',
    group: 'schedule',
    hosts: 'same',
    choices: EXCHANGE_ORDERS,
    default: 'ready',
    doc: "priority: each group's all-reduce in chunks; a group forward needs earlier overtakes",
    check: choice(EXCHANGE_ORDERS),
  },
  chunkFloats: {
    kind: 'integer',
    group: 'schedule',
    hosts: 'same',
    default: '1048576 (4 MiB)',
    doc: "priority: floats per chunk of a group's all-reduce",
    check: positiveInt(),
  },
  batchNorm: {
    kind: 'string',
    group: 'schedule',
    hosts: 'same',
    choices: ['sync', 'local'],
    default: 'sync',
    doc: 'sync: global-batch statistics, as one engine; local: per device',
    check: choice(['sync', 'local'] as const),
  },
  forwardWait: {
    kind: 'string',
    group: 'schedule',
    hosts: "own: when this host's forward waits: the same bits either way",
    choices: ['group', 'step'],
    default: 'group',
    doc: "group: wait for each group's update just before the layer using it",
    check: choice(['group', 'step'] as const),
  },
};
