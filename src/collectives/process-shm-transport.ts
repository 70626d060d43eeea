/**
 * The shm transport: the ranks of several processes on one machine (and the
 * threads of each) meet in one POSIX shared-memory segment that every process
 * maps (the shm addon, native/shm), instead of TCP loopback. Each rank has a
 * slot of `chunkFloats` floats in each of two staging areas; a round copies a
 * piece of the rank's buffer into its slot, then the ranks meet at a
 * cross-process barrier (futexes on the segment, process-barrier.ts).
 *
 * - all-reduce, per piece: every rank writes its copy; barrier; rank r reduces
 *   shard r (`shardOf`) over every slot in rank order with the reference loops
 *   (or the engine's reducer for a mean, the same bits) into its own slot;
 *   barrier; every rank copies every shard into its buffer. So the result is
 *   `reduceSlotsInto` over the ranks' copies, the bits of every other transport.
 * - all-gather and broadcast: the rank (the root) writes its piece; barrier;
 *   every rank copies.
 * - barrier: the barrier.
 *
 * Rounds alternate between the two areas, so two barriers per piece suffice:
 * a rank writes area a again only after the next round's barrier, which every
 * rank enters after reading area a. Every buffer, registered or not, is
 * copied through the segment (a peer process cannot see another's
 * SharedArrayBuffers). Waits are bounded: a dead peer process fails the
 * others at once (PEER_LOST naming its rank, host and pid), a hung one after
 * the timeout (STALLED), a failed rank's peers at once; an aborted run is
 * seen before each operation and while waiting (ABORTED).
 */
import { TandemError } from '../errors.js';
import { BlockingBackedCollective } from './collective.js';
import type { BlockingCollective, Collective, CollectiveEnv, ReduceOp, SlotReducer } from './collective.js';
import type { CommunicatorSpec, PreparedCommunicator, RankHandle, Transport } from './transport.js';
import { reduceMeanInto, reduceSlotsInto, shardOf } from './reduce-slots.js';
import { loadShmAddon, SHM_HOW_TO, type ShmAddon } from './shm/shm-addon.js';
import { areaSlots, segmentLayout, type SegmentLayout } from './shm/segment-layout.js';
import { ProcessBarrier, type RankNaming } from './shm/process-barrier.js';
import { describeProcess, type ProcessKind } from '../world/topology.js';
import { meetOnSegment, privateSegment, SHM_SETUP_TIMEOUT_MS, type MetSegment } from './shm/shm-meeting.js';

/** The staging areas' bytes, all ranks together (a container's /dev/shm is often 64 MiB). */
export const SHM_STAGING_BYTES = 32 << 20;

/**
 * Floats per rank per staging area: the largest piece one round moves (4 MiB for up to 4 ranks, less beyond, at least
 * 256 KiB).
 */
export function shmChunkFloats(ranks: number): number {
  return Math.max(1 << 16, Math.min(1 << 20, 2 ** Math.floor(Math.log2(SHM_STAGING_BYTES / (2 * ranks * 4)))));
}

/** What a rank needs (structured-cloneable: the segment is a SharedArrayBuffer over the mapping). */
export interface ShmRankData {
  segment: SharedArrayBuffer;
  layout: SegmentLayout;
  /** Process p's address, to name a peer's host (empty inside one process). */
  addresses: string[];
  /** What the processes are, as errors name them (`describeProcess`): hosts (absent) or GPU processes. */
  processKind?: ProcessKind;
}

export const SHM_TRANSPORT_NAME = 'shm';

export const PROCESS_SHM_TRANSPORT: Transport = {
  name: SHM_TRANSPORT_NAME,
  description:
    'processes of one machine (and their threads) through one POSIX shared-memory segment with futex barriers; ' +
    'rank-ordered sums',
  blocking: true,
  prepare: (spec: CommunicatorSpec) => prepareShm(spec),
  open(handle: RankHandle, env: CollectiveEnv): Collective {
    return new ProcessShmCollective(handle.rank, handle.size, handle.data as ShmRankData, env);
  },
};

/**
 * Benches' and tests' settings: the staging piece (default `shmChunkFloats`), the processes' meeting timeout (default
 * SHM_SETUP_TIMEOUT_MS).
 */
export interface ShmTuning {
  chunkFloats?: number;
  setupTimeoutMs?: number;
}

/** The communicator's segment, met by every process of the world (or this process's alone). */
export async function prepareShm(
  spec: CommunicatorSpec,
  { chunkFloats, setupTimeoutMs = SHM_SETUP_TIMEOUT_MS }: ShmTuning = {},
): Promise<PreparedCommunicator> {
  const addon = requireAddon();
  const world = spec.world;
  if (world && (world.worldSize % spec.size !== 0 || world.rankOffset % spec.size !== 0)) {
    throw new TandemError(
      'BAD_CONFIG',
      `transport 'shm' needs the same devices in every process: ${spec.size} here, ${world.worldSize} in the world, ` +
        `this process's first rank ${world.rankOffset}`,
    );
  }
  const ranks = world ? world.worldSize : spec.size;
  const layout = segmentLayout(ranks, ranks / spec.size, chunkFloats ?? shmChunkFloats(ranks));
  const met: MetSegment = world
    ? await meetOnSegment(addon, layout, world, setupTimeoutMs)
    : privateSegment(addon, layout, spec.name);
  const data: ShmRankData = { segment: met.segment, layout, addresses: met.addresses, processKind: world?.processKind };
  const offset = world ? world.rankOffset : 0;
  const handles: RankHandle[] = Array.from({ length: spec.size }, (_, local) => ({
    transport: SHM_TRANSPORT_NAME,
    communicator: spec.name,
    rank: offset + local,
    size: ranks,
    data,
  }));
  return { handles, transfer: handles.map(() => []) };
}

function requireAddon(): ShmAddon {
  const load = loadShmAddon();
  if (!load.loaded)
    throw new TandemError('BAD_CONFIG', `transport 'shm' is not available: ${load.reason}. To get it, ${SHM_HOW_TO}`);
  return load.addon;
}

export class ProcessShmCollective extends BlockingBackedCollective {
  readonly transport = SHM_TRANSPORT_NAME;
  readonly blocking: BlockingCollective;
  private readonly gate: ProcessBarrier;
  private readonly areas: Float32Array[][];
  private readonly reducer: SlotReducer;
  private readonly naming: RankNaming;
  private round = 0;
  private open = true;

  constructor(
    readonly rank: number,
    readonly size: number,
    private readonly data: ShmRankData,
    private readonly env: CollectiveEnv,
  ) {
    super();
    const { segment, layout } = data;
    this.naming = rankNaming(data);
    this.gate = new ProcessBarrier(segment, layout, rank, requireAddon(), env, this.naming);
    this.areas = [areaSlots(segment, layout, 0), areaSlots(segment, layout, 1)];
    this.reducer = env.reducer ?? { reduceMeanInto };
    this.blocking = {
      allReduce: (buf, start, end, op) => this.run(() => this.allReduceNow(buf, start, end, op)),
      allGather: (mine, all) => this.run(() => this.allGatherNow(mine, all)),
      broadcast: (buf, root, start, end) => this.run(() => this.broadcastNow(buf, root, start, end)),
      barrier: () => this.run(() => this.gate.arrive('peers at a barrier')),
    };
  }

  close(): void {
    this.open = false;
  }

  /**
   * One operation: refused once closed or failed, ABORTED when the run aborted; a failure marks the segment for the
   * peers.
   */
  private run(operation: () => void): void {
    if (!this.open)
      throw new TandemError(
        'ABORTED',
        `shm ${this.naming.self(this.rank)}: the communicator is closed (a previous operation failed or it was closed)`,
      );
    if (this.env.isAborted()) throw new TandemError('ABORTED', 'run aborted by another thread');
    try {
      operation();
    } catch (err) {
      if (err instanceof TandemError) {
        this.open = false;
        this.gate.fail();
      }
      throw err;
    }
  }

  /** The slots of this round's area (rounds alternate between the two). */
  private nextArea(): Float32Array[] {
    return this.areas[this.round++ & 1];
  }

  private allReduceNow(buf: Float32Array, start: number, end: number, op: ReduceOp): void {
    if (this.size === 1 || end <= start) return;
    const piece = this.data.layout.chunkFloats;
    for (let c = start; c < end; c += piece) {
      const len = Math.min(piece, end - c),
        slots = this.nextArea(),
        mine = slots[this.rank];
      mine.set(buf.subarray(c, c + len));
      this.gate.arrive(`peers to hand over their copies (all-reduce ${op})`);
      const [s, e] = shardOf(0, len, this.rank, this.size);
      if (op === 'mean') this.reducer.reduceMeanInto(slots, mine, s, e);
      else reduceSlotsInto(slots, mine, s, e, op);
      this.gate.arrive(`peers to reduce their shards (all-reduce ${op})`);
      for (let r = 0; r < this.size; r++) {
        const [rs, re] = shardOf(0, len, r, this.size);
        buf.set(slots[r].subarray(rs, re), c + rs);
      }
    }
  }

  private allGatherNow(mine: Float32Array, all: Float32Array): void {
    const m = mine.length;
    if (all.length !== m * this.size)
      throw new RangeError(`allGather: ${all.length} floats received for ${this.size} ranks of ${m}`);
    if (this.size === 1) {
      all.set(mine);
      return;
    }
    const piece = this.data.layout.chunkFloats;
    for (let c = 0; c < m; c += piece) {
      const len = Math.min(piece, m - c),
        slots = this.nextArea();
      slots[this.rank].set(mine.subarray(c, c + len));
      this.gate.arrive('peers to hand over their part (all-gather)');
      for (let r = 0; r < this.size; r++) all.set(slots[r].subarray(0, len), r * m + c);
    }
  }

  private broadcastNow(buf: Float32Array, root: number, start: number, end: number): void {
    if (this.size === 1 || end <= start) return;
    if (!Number.isInteger(root) || root < 0 || root >= this.size)
      throw new RangeError(`broadcast: root ${root} is not a rank of ${this.size}`);
    const piece = this.data.layout.chunkFloats;
    for (let c = start; c < end; c += piece) {
      const len = Math.min(piece, end - c),
        slots = this.nextArea();
      if (this.rank === root) slots[root].set(buf.subarray(c, c + len));
      this.gate.arrive(`rank ${root}'s values (broadcast)`);
      if (this.rank !== root) buf.set(slots[root].subarray(0, len), c);
    }
  }
}

function rankNaming(data: ShmRankData): RankNaming {
  const { layout, addresses } = data;
  if (layout.processes === 1) return { self: r => `rank ${r}`, peer: q => `peer rank ${q}` };
  const host = (q: number) => Math.floor(q / layout.ranksPerProcess);
  return {
    self: r => `rank ${r} (${describeProcess(data, host(r))})`,
    peer: q =>
      `peer rank ${q} (${describeProcess(data, host(q))}${addresses[host(q)] ? `, ${addresses[host(q)]}` : ''})`,
  };
}
