/**
 * The shared-memory transport: the ranks of one process (threads) reduce
 * through SharedArrayBuffers, in the two forms of the design —
 *
 * - `primary`: the seed's scheme — rank 0 reduces every slot, then every rank
 *   copies rank 0's result;
 * - `sharded`: reduce-scatter + all-gather — rank r reduces its own 1/N slice
 *   of the range from all slots, then every rank gathers the other slices.
 *
 * A rank passes only its own buffer. When that buffer is its slot of a
 * registered slot buffer (the run's gradients and parameters), the peers'
 * copies are read in place; any other buffer goes through a staging area of
 * one slot per rank, in chunks. Both forms reduce each element over the ranks
 * in rank order in float32 (`reduce-slots.ts`), so every rank holds the same
 * bits and so does every other transport that reduces in rank order.
 */
import { BlockingBackedCollective } from './collective.js';
import type {
  AllReduceKind,
  BlockingCollective,
  Collective,
  CollectiveEnv,
  ReduceOp,
  SlotReducer,
  SlotSet,
} from './collective.js';
import { TandemError } from '../errors.js';
import type { CommunicatorSpec, PreparedCommunicator, RankHandle, SlotBuffer, Transport } from './transport.js';
import { reduceMeanInto, reduceSlotsInto, shardOf } from './reduce-slots.js';
import { BARRIER_WORDS, SharedBarrier } from './shared-barrier.js';

/** What every rank of one shared-memory communicator shares. */
export interface SharedMemoryData {
  algorithm: AllReduceKind;
  barrier: SharedArrayBuffer;
  staging: SharedArrayBuffer;
  /** Per rank two halves of SMALL_FLOATS: the one-barrier all-reduce's slots. */
  small: SharedArrayBuffer;
  stagingFloats: number;
  registered: SlotBuffer[];
}

/** The most floats the one-barrier all-reduce takes (more: the staging area's three-barrier forms). */
export const SMALL_FLOATS = 4096;

/** Prepares synchronously (nothing to wait for). */
export const SHARED_MEMORY_TRANSPORT: Omit<Transport, 'prepare'> & {
  prepare(spec: CommunicatorSpec): PreparedCommunicator;
} = {
  name: 'shared-memory',
  description:
    "threads of one process, through SharedArrayBuffers (zero-copy for the run's parameter and gradient buffers)",
  blocking: true,
  prepare(spec: CommunicatorSpec): PreparedCommunicator {
    if (spec.world)
      throw new TandemError(
        'BAD_CONFIG',
        "transport 'shared-memory' reaches the devices of one process only; several hosts need transport 'gloo'",
      );
    const stagingFloats = Math.max(1, spec.stagingFloats);
    const data: SharedMemoryData = {
      algorithm: spec.options.allReduce,
      barrier: new SharedArrayBuffer(BARRIER_WORDS * 4),
      staging: new SharedArrayBuffer(spec.size * stagingFloats * 4),
      small: new SharedArrayBuffer(spec.size * 2 * SMALL_FLOATS * 4),
      stagingFloats,
      registered: spec.registered,
    };
    const handles: RankHandle[] = Array.from({ length: spec.size }, (_, rank) => ({
      transport: 'shared-memory',
      communicator: spec.name,
      rank,
      size: spec.size,
      data,
    }));
    return { handles, transfer: handles.map(() => []) };
  },
  open(handle: RankHandle, env: CollectiveEnv): Collective {
    return new SharedMemoryCollective(handle.rank, handle.size, handle.data as SharedMemoryData, env);
  },
};

export class SharedMemoryCollective extends BlockingBackedCollective {
  readonly transport = 'shared-memory';
  readonly blocking: BlockingCollective;
  private readonly gate: SharedBarrier;
  private readonly staging: Float32Array[];
  private readonly reducer: SlotReducer;
  private readonly peers = new WeakMap<Float32Array, SlotSet>();
  /** Each rank's two small slots, [half][rank]; and where this rank reduces them. */
  private readonly small: SlotSet[];
  private readonly smallOut = new Float32Array(SMALL_FLOATS);
  private smallCalls = 0;

  constructor(
    readonly rank: number,
    readonly size: number,
    private readonly data: SharedMemoryData,
    env: CollectiveEnv,
  ) {
    super();
    this.gate = new SharedBarrier(data.barrier, 0, size, env);
    this.staging = Array.from(
      { length: size },
      (_, r) => new Float32Array(data.staging, r * data.stagingFloats * 4, data.stagingFloats),
    );
    this.reducer = env.reducer ?? { reduceMeanInto };
    this.small = [0, 1].map(half =>
      Array.from(
        { length: size },
        (_, r) => new Float32Array(data.small, (r * 2 + half) * SMALL_FLOATS * 4, SMALL_FLOATS),
      ),
    );
    this.blocking = {
      allReduce: (buf, start, end, op) => this.allReduceNow(buf, start, end, op),
      allGather: (mine, all) => this.allGatherNow(mine, all),
      broadcast: (buf, root, start, end) => this.broadcastNow(buf, root, start, end),
      barrier: () => this.gate.arrive('peers at a barrier'),
    };
  }

  close(): void {
    /* nothing held */
  }

  async reduceScatterMean(buf: Float32Array, start: number, end: number): Promise<[number, number]> {
    const slots = this.peersOf(buf);
    if (!slots)
      throw new RangeError("reduceScatterMean: the buffer must be this rank's slot of a registered slot buffer");
    if (this.size === 1 || end <= start) return shardOf(start, end, this.rank, this.size);
    return this.reduceOwnShard(slots, start, end, (out, s, e) => this.reducer.reduceMeanInto(slots, out, s, e));
  }

  /** Once every rank handed over its slot: this rank's shard of [start, end) reduced into its own slot; the shard. */
  private reduceOwnShard(
    slots: SlotSet,
    start: number,
    end: number,
    reduce: (out: Float32Array, s: number, e: number) => void,
  ): [number, number] {
    this.gate.arrive('peers to hand over their gradients (reduce-scatter)');
    const [s, e] = shardOf(start, end, this.rank, this.size);
    reduce(slots[this.rank], s, e);
    return [s, e];
  }

  private allReduceNow(buf: Float32Array, start: number, end: number, op: ReduceOp): void {
    if (this.size === 1 || end <= start) return;
    const slots = this.peersOf(buf);
    if (slots) {
      this.reduceSlots(slots, start, end, op);
      return;
    }
    if (end - start <= SMALL_FLOATS) {
      this.allReduceSmall(buf, start, end, op);
      return;
    }
    const mine = this.staging[this.rank];
    for (let c = start; c < end; c += this.data.stagingFloats) {
      const len = Math.min(this.data.stagingFloats, end - c);
      mine.set(buf.subarray(c, c + len));
      this.reduceSlots(this.staging, 0, len, op);
      buf.set(mine.subarray(0, len), c);
    }
  }

  /** out[s, e) = op over the slots' [s, e): the run's reducer for a mean (the addon's loop, when loaded). */
  private reduceInto(slots: SlotSet, out: Float32Array, s: number, e: number, op: ReduceOp): void {
    if (op === 'mean') this.reducer.reduceMeanInto(slots, out, s, e);
    else reduceSlotsInto(slots, out, s, e, op);
  }

  /** A small buffer's all-reduce in one barrier (the header says why it is safe). */
  private allReduceSmall(buf: Float32Array, start: number, end: number, op: ReduceOp): void {
    const slots = this.small[this.smallCalls++ % 2];
    const len = end - start;
    slots[this.rank].set(buf.subarray(start, end));
    this.gate.arrive('peers to hand over their values (small all-reduce)');
    this.reduceInto(slots, this.smallOut, 0, len, op);
    buf.set(this.smallOut.subarray(0, len), start);
  }

  /** Every rank's slot holds op over all slots on [start, end). */
  private reduceSlots(slots: SlotSet, start: number, end: number, op: ReduceOp): void {
    const reduce = (out: Float32Array, s: number, e: number) => this.reduceInto(slots, out, s, e, op);
    const mine = slots[this.rank];
    switch (this.data.algorithm) {
      case 'primary':
        this.gate.arrive('peers to hand over their gradients (primary reduce)');
        if (this.rank === 0) reduce(mine, start, end);
        this.gate.arrive('the primary device to reduce');
        if (this.rank !== 0) mine.set(slots[0].subarray(start, end), start);
        break;
      case 'sharded': {
        this.reduceOwnShard(slots, start, end, reduce);
        this.gate.arrive('peers to reduce their shards');
        for (let r = 0; r < this.size; r++) {
          if (r === this.rank) continue;
          const [rs, re] = shardOf(start, end, r, this.size);
          mine.set(slots[r].subarray(rs, re), rs);
        }
        break;
      }
      default: {
        const never: never = this.data.algorithm;
        throw new Error(`unknown all-reduce ${String(never)}`);
      }
    }
    // Nobody may overwrite its slot (next step's gradients) while a peer still reads it.
    this.gate.arrive('peers to finish gathering');
  }

  private allGatherNow(mine: Float32Array, all: Float32Array): void {
    const m = mine.length;
    if (all.length !== m * this.size)
      throw new RangeError(`allGather: ${all.length} floats received for ${this.size} ranks of ${m}`);
    if (m === 0) return;
    for (let c = 0; c < m; c += this.data.stagingFloats) {
      const len = Math.min(this.data.stagingFloats, m - c);
      this.staging[this.rank].set(mine.subarray(c, c + len));
      this.gate.arrive('peers to hand over their part (all-gather)');
      for (let r = 0; r < this.size; r++) all.set(this.staging[r].subarray(0, len), r * m + c);
      this.gate.arrive('peers to finish gathering');
    }
  }

  private broadcastNow(buf: Float32Array, root: number, start: number, end: number): void {
    if (this.size === 1 || end <= start) return;
    const slots = this.peersOf(buf);
    if (slots) {
      this.gate.arrive('the root to publish the broadcast values');
      if (this.rank !== root) slots[this.rank].set(slots[root].subarray(start, end), start);
      this.gate.arrive('peers to finish the broadcast copy');
      return;
    }
    for (let c = start; c < end; c += this.data.stagingFloats) {
      const len = Math.min(this.data.stagingFloats, end - c);
      if (this.rank === root) this.staging[root].set(buf.subarray(c, c + len));
      this.gate.arrive('the root to publish the broadcast values');
      if (this.rank !== root) buf.set(this.staging[root].subarray(0, len), c);
      this.gate.arrive('peers to finish the broadcast copy');
    }
  }

  /** The peers' copies of `buf` when it is this rank's slot of a registered buffer (read in place), else undefined. */
  private peersOf(buf: Float32Array): SlotSet | undefined {
    const known = this.peers.get(buf);
    if (known) return known;
    const slots = peerSlotsOf(this.data.registered, this.rank, this.size, buf);
    if (slots) this.peers.set(buf, slots);
    return slots;
  }
}

/**
 * Every rank's copy of `buf` when `buf` lies in rank `rank`'s slot of one of the registered buffers of `size` slots,
 * else undefined.
 */
export function peerSlotsOf(
  registered: readonly SlotBuffer[],
  rank: number,
  size: number,
  buf: Float32Array,
): SlotSet | undefined {
  for (const reg of registered) {
    if (buf.buffer !== reg.buffer || reg.slots !== size) continue;
    const slotBytes = reg.slotFloats * 4;
    const within = buf.byteOffset - rank * slotBytes;
    if (within < 0 || within + buf.byteLength > slotBytes) continue;
    return Array.from({ length: size }, (_, r) => new Float32Array(reg.buffer, r * slotBytes + within, buf.length));
  }
  return undefined;
}
