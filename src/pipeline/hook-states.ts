/**
 * A communication hook's per-group states on one rank's comm thread, made for
 * every group before the first exchange, and what a checkpoint needs of them:
 * their values put back from a checkpoint (`restore`), and a copy in shared
 * memory (`share`) refreshed after each exchange of a group (`publish`), which
 * the main thread reads once every group of the checkpoint's step is applied
 * (the comm thread then waits for the next step's gradients: the copy holds
 * still). Per group: the arrays of the hook's `stateArrays`.
 */
import { TandemError } from '../errors.js';
import type { ParameterGroup, ParameterSpec } from '../model/parameter-layout.js';
import type { BucketInfo, CommHook, CommHookOptions } from './comm-hook.js';

/** One rank's hook state: per group, the values of its state arrays. */
export type RankHookState = Float32Array[][];

export class HookStates {
  readonly groups: { info: BucketInfo; state: unknown; arrays: Float32Array[] }[];
  private shared?: RankHookState;

  constructor(
    readonly hook: CommHook,
    options: CommHookOptions,
    groups: readonly ParameterGroup[],
    variables: readonly ParameterSpec[],
    rank: number,
    size: number,
    seed: number,
  ) {
    this.groups = groups.map((_, g) => {
      const info = bucketInfo(groups, g, variables, rank, size, seed);
      const state = hook.init(info, options);
      return { info, state, arrays: hook.stateArrays?.(state) ?? [] };
    });
  }

  /** Puts a checkpoint's values back (this rank's); BAD_CHECKPOINT when they do not fit the hook's arrays. */
  restore(saved: RankHookState, source: string): void {
    const fits =
      saved.length === this.groups.length &&
      this.groups.every(
        (g, i) => saved[i].length === g.arrays.length && g.arrays.every((a, j) => saved[i][j].length === a.length),
      );
    if (!fits) {
      throw new TandemError(
        'BAD_CHECKPOINT',
        `${source}: the state of communication hook '${this.hook.name}' in it does not fit this run's ` +
          ('(other exchange groups, or a hook whose state arrays changed); resume with the strategy and hook the ' +
            'checkpoint was written with'),
      );
    }
    this.groups.forEach((g, i) => g.arrays.forEach((a, j) => a.set(saved[i][j])));
  }

  /** Copies of every group's state arrays in shared memory (for the main thread), kept current by `publish`. */
  share(): RankHookState {
    this.shared = this.groups.map(g =>
      g.arrays.map(a => {
        const copy = new Float32Array(new SharedArrayBuffer(a.byteLength));
        copy.set(a);
        return copy;
      }),
    );
    return this.shared;
  }

  /** After an exchange of `group`: its shared copy takes the new values. */
  publish(group: number): void {
    if (!this.shared) return;
    this.groups[group].arrays.forEach((a, j) => this.shared![group][j].set(a));
  }
}

function bucketInfo(
  groups: readonly ParameterGroup[],
  group: number,
  variables: readonly ParameterSpec[],
  rank: number,
  size: number,
  seed: number,
): BucketInfo {
  const { name, start, end } = groups[group];
  return {
    group,
    groupName: name,
    length: end - start,
    rank,
    size,
    seed,
    variables: variables
      .filter(v => v.offset >= start && v.offset + v.size <= end)
      .map(v => ({ name: v.name, shape: [...v.shape], offset: v.offset - start, size: v.size })),
  };
}
