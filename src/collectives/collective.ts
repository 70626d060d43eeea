/**
 * The collective contract: what one rank of a communicator can ask of its
 * peers. A collective sees only its own rank's buffer — never the peers' —
 * so a network transport (Gloo between hosts), a message-passing one, or a
 * hierarchical composition (shared memory inside a process, network between
 * processes) implements it as well as shared memory does.
 *
 * Every operation returns a promise (a transport may complete it on another
 * thread), gives up with STALLED after the communicator's timeout and with
 * ABORTED when the run aborts. Transports that can also complete an operation
 * on the calling thread offer `blocking`: the same operations, for use inside
 * a synchronous tfjs forward or backward pass (Partial FC's softmax
 * statistics; synchronised batch statistics).
 *
 * Results are the same bits on every rank: sums and means add the ranks'
 * values in rank order 0..size-1, rounding to float32 at every addition.
 */
export const REDUCE_OPS = ['sum', 'mean', 'max'] as const;
export type ReduceOp = (typeof REDUCE_OPS)[number];

/** The shared-memory transport's two all-reduce algorithms (the same bits). */
export const ALL_REDUCE_KINDS = ['sharded', 'primary'] as const;
export type AllReduceKind = (typeof ALL_REDUCE_KINDS)[number];

/** One buffer as every rank holds it: slot r is rank r's copy (inside a shared-memory transport only). */
export type SlotSet = readonly Float32Array[];

/** The operations, completed on the calling thread before they return. */
export interface BlockingCollective {
  /** buf[start, end) becomes op over every rank's buf[start, end). */
  allReduce(buf: Float32Array, start: number, end: number, op: ReduceOp): void;
  /** all[r * mine.length ...] becomes rank r's `mine`, for every r (all.length = size * mine.length). */
  allGather(mine: Float32Array, all: Float32Array): void;
  /** buf[start, end) becomes root's buf[start, end). */
  broadcast(buf: Float32Array, root: number, start: number, end: number): void;
  barrier(): void;
}

export interface Collective {
  /** The registry name of the transport that runs it. */
  readonly transport: string;
  readonly rank: number;
  readonly size: number;
  allReduce(buf: Float32Array, start: number, end: number, op: ReduceOp): Promise<void>;
  allGather(mine: Float32Array, all: Float32Array): Promise<void>;
  broadcast(buf: Float32Array, root: number, start: number, end: number): Promise<void>;
  barrier(): Promise<void>;
  /**
   * Present where a rank reads its peers' copies in place (the in-process shared-memory transport, on a registered
   * slot buffer): buf[shard) becomes the mean over every rank's buf[shard), for this rank's own shard of [start, end)
   * (reduce-slots.ts shardOf), which it returns; the rest of buf is left as it was. The peers may still be reading this
   * rank's buf: every rank calls barrier() before it writes buf again.
   */
  reduceScatterMean?(buf: Float32Array, start: number, end: number): Promise<[number, number]>;
  /** Present when the transport can complete operations on the calling thread. */
  readonly blocking?: BlockingCollective;
  /** Releases what the rank holds (ports, sockets). Idempotent. */
  close(): void;
}

/**
 * A collective whose every operation completes on the calling thread: each promise is its `blocking` operation's,
 * already settled. The in-process, process, Gloo and hierarchical transports extend it and build `blocking`.
 */
export abstract class BlockingBackedCollective implements Collective {
  abstract readonly transport: string;
  abstract readonly rank: number;
  abstract readonly size: number;
  abstract readonly blocking: BlockingCollective;
  abstract close(): void;

  async allReduce(buf: Float32Array, start: number, end: number, op: ReduceOp): Promise<void> {
    this.blocking.allReduce(buf, start, end, op);
  }
  async allGather(mine: Float32Array, all: Float32Array): Promise<void> {
    this.blocking.allGather(mine, all);
  }
  async broadcast(buf: Float32Array, root: number, start: number, end: number): Promise<void> {
    this.blocking.broadcast(buf, root, start, end);
  }
  async barrier(): Promise<void> {
    this.blocking.barrier();
  }
}

/** What a rank's thread gives a transport when it opens a communicator there. */
export interface CollectiveEnv {
  /**
   * A rank waiting longer than this for its peers fails with STALLED. The opener may change it over the run (longer
   * in the first step); a transport reads it at each wait, or fixes its own when it opens (Gloo).
   */
  timeoutMs: number;
  /** Polled while waiting: true makes the operation fail with ABORTED. */
  isAborted(): boolean;
  /** Called while waiting: the thread's proof of life for the run's watchdog. */
  heartbeat?(): void;
  /** Who does the float arithmetic of a reduction (the engine's; the JS loops by default). */
  reducer?: SlotReducer;
}

/** Arithmetic over the slots of one buffer; `reduceSlotsInto` in reduce-slots.ts is the reference. */
export interface SlotReducer {
  /** out[start, end) = the mean over the slots (summed in float32 in slot order); out may be a slot. */
  reduceMeanInto(slots: SlotSet, out: Float32Array, start: number, end: number): void;
}
