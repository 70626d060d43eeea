/**
 * A sense-reversing barrier of `parties` threads on two words of a
 * SharedArrayBuffer (count, generation). Waits in Atomics.wait slices that
 * check the abort flag and beat the thread's heartbeat, with a deadline:
 * every wait has a way out (ABORTED, STALLED).
 */
import { TandemError } from '../errors.js';
import type { CollectiveEnv } from './collective.js';

const COUNT = 0;
const GENERATION = 1;
export const BARRIER_WORDS = 2;
export const WAIT_SLICE_MS = 50;

export class SharedBarrier {
  private readonly words: Int32Array;

  /** `words` of the buffer from `wordOffset` on: BARRIER_WORDS Int32 words, zero at the start. */
  constructor(
    buffer: SharedArrayBuffer,
    wordOffset: number,
    private readonly parties: number,
    private readonly env: Pick<CollectiveEnv, 'timeoutMs' | 'isAborted' | 'heartbeat'>,
  ) {
    this.words = new Int32Array(buffer, wordOffset * 4, BARRIER_WORDS);
  }

  /** Returns when every party arrived; `what` names what this rank waits for, in the STALLED message. */
  arrive(what: string): void {
    const words = this.words;
    const generation = Atomics.load(words, GENERATION);
    if (Atomics.add(words, COUNT, 1) === this.parties - 1) {
      Atomics.store(words, COUNT, 0);
      Atomics.add(words, GENERATION, 1);
      Atomics.notify(words, GENERATION);
      return;
    }
    const deadline = Date.now() + this.env.timeoutMs;
    while (Atomics.load(words, GENERATION) === generation) {
      if (this.env.isAborted()) throw new TandemError('ABORTED', 'run aborted by another thread');
      if (Date.now() > deadline) throw stalledError(what, this.env.timeoutMs);
      this.env.heartbeat?.();
      Atomics.wait(words, GENERATION, generation, WAIT_SLICE_MS);
    }
  }
}

/** The STALLED error of a rank that waited `ms` for `what`. */
export function stalledError(what: string, ms: number): TandemError {
  return new TandemError(
    'STALLED',
    `waited ${(ms / 1000).toFixed(1)} s for ${what}; a peer device stopped responding ` +
      '(raise stallTimeoutMs if steps are legitimately this slow)',
  );
}
