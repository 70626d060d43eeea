/**
 * What each thread of a device receives of the run's configuration: its slice, not the whole `ResolvedConfig`. The
 * slices are types (what a thread's code may read does not compile otherwise) and values (the main thread copies just
 * those fields into the thread's start message).
 */
import type { ResolvedConfig } from '../config-types.js';

/** A device's compute thread: the model, the data shape, its engine, the method's device part, the step's checks. */
export const COMPUTE_FIELDS = [
  'accumulate',
  'backend',
  'batch',
  'batchNorm',
  'classWeight',
  'classes',
  'classifier',
  'devices',
  'forwardWait',
  'loss',
  'lrSchedule',
  'method',
  'metrics',
  'model',
  'nativeFusion',
  'nativeThreads',
  'precision',
  'onNan',
  'optimizer',
  'partialBatch',
  'perDevice',
  'plugins',
  'pluginOptions',
  'sampleShape',
  'seed',
  'stallTimeoutMs',
  'targetShape',
  'topology',
  'trainSize',
] as const satisfies readonly (keyof ResolvedConfig)[];

/** A device's comm thread: the exchange, the hook, the update, its engine's arithmetic, the watchdog. */
export const COMM_FIELDS = [
  'backend',
  'commHook',
  'devices',
  'exchange',
  'link',
  'localUpdate',
  'lrSchedule',
  'onNan',
  'optimizer',
  'plugins',
  'pluginOptions',
  'seed',
  'stallTimeoutMs',
  'steps',
  'topology',
] as const satisfies readonly (keyof ResolvedConfig)[];

export type ComputeConfig = Pick<ResolvedConfig, (typeof COMPUTE_FIELDS)[number]>;
export type CommConfig = Pick<ResolvedConfig, (typeof COMM_FIELDS)[number]>;

function slice<K extends keyof ResolvedConfig>(cfg: ResolvedConfig, fields: readonly K[]): Pick<ResolvedConfig, K> {
  const out = {} as Pick<ResolvedConfig, K>;
  for (const k of fields) out[k] = cfg[k];
  return out;
}

/** The compute thread's slice of `cfg`. */
export function computeSlice(cfg: ResolvedConfig): ComputeConfig {
  return slice(cfg, COMPUTE_FIELDS);
}

/** The comm thread's slice of `cfg`. */
export function commSlice(cfg: ResolvedConfig): CommConfig {
  return slice(cfg, COMM_FIELDS);
}
