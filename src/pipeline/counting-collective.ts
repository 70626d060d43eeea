/**
 * A collective that counts what its user hands it: the floats this rank
 * passes to all-reduce (or reduce-scatter), all-gather (its own part) and broadcast, per exchange.
 * It forwards every call unchanged (the same buffers, so a transport's fast
 * paths still apply): the wire measure of a run with and without a hook.
 */
import type { Collective, ReduceOp } from '../collectives/collective.js';

export class CountingCollective implements Collective {
  private floats = 0;
  readonly reduceScatterMean?: (buf: Float32Array, start: number, end: number) => Promise<[number, number]>;
  constructor(private readonly inner: Collective) {
    const reduceScatter = inner.reduceScatterMean?.bind(inner);
    if (reduceScatter) {
      this.reduceScatterMean = (buf, start, end) => {
        this.floats += Math.max(0, end - start);
        return reduceScatter(buf, start, end);
      };
    }
  }
  get transport(): string {
    return this.inner.transport;
  }
  get rank(): number {
    return this.inner.rank;
  }
  get size(): number {
    return this.inner.size;
  }
  get blocking() {
    return this.inner.blocking;
  }

  allReduce(buf: Float32Array, start: number, end: number, op: ReduceOp): Promise<void> {
    this.floats += Math.max(0, end - start);
    return this.inner.allReduce(buf, start, end, op);
  }
  allGather(mine: Float32Array, all: Float32Array): Promise<void> {
    this.floats += mine.length;
    return this.inner.allGather(mine, all);
  }
  broadcast(buf: Float32Array, root: number, start: number, end: number): Promise<void> {
    this.floats += Math.max(0, end - start);
    return this.inner.broadcast(buf, root, start, end);
  }
  barrier(): Promise<void> {
    return this.inner.barrier();
  }
  close(): void {
    this.inner.close();
  }

  /** Floats handed over since the last call. */
  take(): number {
    const n = this.floats;
    this.floats = 0;
    return n;
  }
}
