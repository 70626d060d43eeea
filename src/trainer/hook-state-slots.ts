/**
 * The main thread's side of checkpointing a communication hook's state: each
 * comm thread shares a copy of its rank's state arrays (hook-states.ts) at
 * the start; at a checkpoint, once every group of the step is applied, their
 * values are read here (copied out: the comm threads go on writing them).
 */
import type { RankHookState } from '../pipeline/hook-states.js';

export class HookStateSlots {
  private readonly shared = new Map<number, RankHookState>();
  private arrived?: () => void;

  /** `ranks`: the global ranks of this process's devices, in local order. */
  constructor(private readonly ranks: readonly number[]) {}

  deliver(rank: number, arrays: RankHookState): void {
    this.shared.set(rank, arrays);
    if (this.shared.size === this.ranks.length) this.arrived?.();
  }

  /** Every local device's hook state, local order (waits for a share message still in flight). */
  async values(): Promise<RankHookState[]> {
    if (this.shared.size < this.ranks.length)
      await new Promise<void>(resolve => {
        this.arrived = resolve;
      });
    return this.ranks.map(r => this.shared.get(r)!.map(group => group.map(a => a.slice())));
  }
}
