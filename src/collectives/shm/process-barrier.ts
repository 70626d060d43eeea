/**
 * A barrier of the ranks of one shm segment, across processes: a count and a
 * generation word in the segment (the generation is the number of barriers
 * completed), and each rank's count of barriers entered, so a waiting rank
 * knows who has not come. Waits sleep on the generation word with a futex
 * (the shm addon), in slices: every slice checks the run's abort flag, beats
 * the heartbeat, and checks that the ranks not yet arrived still have a
 * running process — a dead peer fails the barrier at once (PEER_LOST, naming
 * its rank, host and pid), a hung one after the timeout (STALLED, naming the
 * ranks not arrived). A rank whose operation failed marks the segment, and
 * its peers fail at once naming it.
 */
import { TandemError } from '../../errors.js';
import type { CollectiveEnv } from '../collective.js';
import { WAIT_SLICE_MS } from '../shared-barrier.js';
import type { ShmAddon } from './shm-addon.js';
import { W_COUNT, W_FAILED, W_GENERATION, type SegmentLayout } from './segment-layout.js';

/**
 * Spins (loads of the generation word) before a rank sleeps in the kernel: a peer a few microseconds behind costs no
 * syscall.
 */
const SPINS = 2000;

/** How messages name a rank. */
export interface RankNaming {
  self(rank: number): string;
  peer(rank: number): string;
}

export class ProcessBarrier {
  private readonly words: Int32Array;
  private entered = 0;

  constructor(
    private readonly segment: SharedArrayBuffer,
    private readonly layout: SegmentLayout,
    private readonly rank: number,
    private readonly addon: ShmAddon,
    private readonly env: Pick<CollectiveEnv, 'timeoutMs' | 'isAborted' | 'heartbeat'>,
    private readonly naming: RankNaming,
  ) {
    this.words = new Int32Array(segment, 0, layout.arrivedWord + layout.ranks);
  }

  /** Returns when every rank entered this barrier; `what` says what this rank waits for, in errors. */
  arrive(what: string): void {
    const words = this.words,
      k = (this.entered = (this.entered + 1) | 0);
    Atomics.store(words, this.layout.arrivedWord + this.rank, k);
    if (Atomics.add(words, W_COUNT, 1) === this.layout.ranks - 1) {
      Atomics.store(words, W_COUNT, 0);
      Atomics.store(words, W_GENERATION, k);
      this.addon.wake(this.segment, W_GENERATION * 4);
      return;
    }
    for (let i = 0; i < SPINS; i++) if (Atomics.load(words, W_GENERATION) === k) return;
    const deadline = Date.now() + this.env.timeoutMs;
    while (Atomics.load(words, W_GENERATION) !== k) {
      this.check(k, what, deadline);
      this.addon.wait(this.segment, W_GENERATION * 4, (k - 1) | 0, WAIT_SLICE_MS);
    }
  }

  /** Marks the segment failed by this rank and wakes every waiter (they fail naming it). */
  fail(): void {
    Atomics.compareExchange(this.words, W_FAILED, 0, this.rank + 1);
    this.addon.wake(this.segment, W_GENERATION * 4);
  }

  private check(k: number, what: string, deadline: number): void {
    if (this.env.isAborted()) throw new TandemError('ABORTED', 'run aborted by another thread');
    const missing = this.missing(k);
    for (const q of missing) {
      const pid = Atomics.load(this.words, this.layout.pidWord + Math.floor(q / this.layout.ranksPerProcess));
      if (pid > 0 && !this.addon.alive(pid)) {
        throw new TandemError(
          'PEER_LOST',
          `shm ${this.naming.self(this.rank)}: lost ${this.naming.peer(q)}: its process ${pid} ended while ` +
            `this rank was waiting for ${what}`,
        );
      }
    }
    const failed = Atomics.load(this.words, W_FAILED) - 1;
    if (failed >= 0 && failed !== this.rank) {
      throw new TandemError(
        'PEER_LOST',
        `shm ${this.naming.self(this.rank)}: ${this.naming.peer(failed)} failed (see its error) while ` +
          `this rank was waiting for ${what}`,
      );
    }
    if (Date.now() > deadline) {
      throw new TandemError(
        'STALLED',
        `shm ${this.naming.self(this.rank)}: waited ${(this.env.timeoutMs / 1000).toFixed(1)} s for ${what}; ` +
          (`${missing.map(q => this.naming.peer(q)).join(', ')} did not come (raise stallTimeoutMs if steps are ` +
            `legitimately this slow)`),
      );
    }
    this.env.heartbeat?.();
  }

  /** The ranks that have not entered barrier k. */
  private missing(k: number): number[] {
    const out: number[] = [];
    for (let q = 0; q < this.layout.ranks; q++)
      if (Atomics.load(this.words, this.layout.arrivedWord + q) - k < 0) out.push(q);
    return out;
  }
}
