/**
 * Communication hooks: what replaces the all-reduce of one exchange group, in
 * the manner of PyTorch DDP's `register_comm_hook`. A hook is a config object
 * (registered by name, see comm-hooks.ts); on each rank's comm thread it makes
 * one persistent state per group (an error-feedback residual, PowerSGD's Q)
 * and, at every step, must leave the MEAN over ranks of the group's gradient
 * in `bucket.buffer` — the same bits on every rank (replicas stay identical
 * only if every rank decodes the same bytes in the same order).
 * A hook of one's own: see CommHook's example.
 */
import type { Collective } from '../collectives/collective.js';
import type { AnyOptionTable } from '../options/declaration.js';

/** A variable of the group, its offset relative to the group's start. */
export interface BucketVariable {
  readonly name: string;
  readonly shape: readonly number[];
  readonly offset: number;
  readonly size: number;
}

/** What a hook knows of a group before its first exchange. */
export interface BucketInfo {
  /** Index of the group in the strategy's groups, and its name. */
  readonly group: number;
  readonly groupName: string;
  /** Floats in the group. */
  readonly length: number;
  /** The group's variables in layout (transmission) order. */
  readonly variables: readonly BucketVariable[];
  readonly rank: number;
  readonly size: number;
  /** The run's seed: state that must agree between ranks (PowerSGD's initial Q) is drawn from it. */
  readonly seed: number;
}

/** One exchange of a group. */
export interface GradBucket extends BucketInfo {
  /** This rank's gradient of the group on entry; the mean over ranks on return (a view of the group's range). */
  readonly buffer: Float32Array;
  readonly step: number;
}

/** Options of the built-in hooks; a user hook reads what it needs. */
export interface CommHookOptions {
  /** fp16, bf16, powersgd: keep what was not sent (per rank) and add it to the next step's gradient. Default true. */
  errorFeedback: boolean;
  /**
   * powersgd: rank r of the approximation P Qᵀ. Default 8 (rank 1 and 4 lost more than 0.5 points on the MNIST bench).
   */
  rank: number;
  /** powersgd: steps before this one are all-reduced uncompressed (DDP's start_powerSGD_iter). Default 10. */
  startStep: number;
  /** powersgd: reuse last step's Q as the start of this step's power iteration. Default true. */
  warmStart: boolean;
  /** powersgd: compress an [n, m] matrix only when n·m > rate · (n + m) · r. Default 2. */
  minCompressionRate: number;
}

export const DEFAULT_COMM_HOOK_OPTIONS: CommHookOptions = {
  errorFeedback: true,
  rank: 8,
  startStep: 10,
  warmStart: true,
  minCompressionRate: 2,
};

/**
 * What replaces the all-reduce of one exchange group (see the module's comment).
 *
 * @example
 * ```ts
 * // my-hook.ts, compiled to my-hook.mjs: `commHook: './my-hook.mjs'` (default export), or registerCommHook in a plugin
 * import type { CommHook } from 'tandem';
 *
 * export default {
 *   name: 'plain',
 *   description: 'all-reduce mean, as without a hook',
 *   init: () => undefined,
 *   exchange: (bucket, _state, collective) => collective.allReduce(bucket.buffer, 0, bucket.buffer.length, 'mean'),
 * } satisfies CommHook;
 * ```
 */
export interface CommHook<State = unknown> {
  readonly name: string;
  readonly description: string;
  /** The fields of `commHookOptions` this hook reads, declared (flags, help, known fields): a plugin's hook's own. */
  readonly options?: AnyOptionTable;
  /** Once per group on each rank, before its first exchange: the group's persistent state. */
  init(info: BucketInfo, options: CommHookOptions): State;
  /**
   * Replaces the group's all-reduce: `bucket.buffer` must hold the mean over ranks on return, the same bits on every
   * rank.
   */
  exchange(bucket: GradBucket, state: State, collective: Collective): Promise<void>;
  /**
   * The arrays that carry the group's state from one step to the next (this rank's residual, PowerSGD's Q): a
   * checkpoint saves their values, a resumed run puts them back after `init`. The same arrays (same lengths) at every
   * call. Omitted: the hook keeps nothing a resumed run needs (it starts afresh).
   */
  stateArrays?(state: State): Float32Array[];
}

/** The built-in hooks. */
export const COMM_HOOKS = ['fp16', 'bf16', 'powersgd'] as const;
export type CommHookName = (typeof COMM_HOOKS)[number];
