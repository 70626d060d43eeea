/**
 * The hierarchical transport: several hosts, several devices each. Inside a
 * host the devices meet in shared memory (the shared-memory transport's slot
 * buffers, read in place, and its barrier); across hosts, the devices with the
 * same local index l form one Gloo context of H ranks (one per host), driven
 * by the device's own thread (comm or compute), never libuv's pool.
 *
 * All-reduce keeps the flat bits — element by element, float32 additions in
 * global-rank order 0..N-1 (global rank = host × L + local), then / N for a
 * mean, exactly `reduceSlotsInto` over the N copies — with a pipelined chain:
 *
 * 1. local barrier: every local slot holds its copy;
 * 2. local device l owns shard l of the range (`shardOf` over L), cut in
 *    chunks of `chunkFloats`. For chunk c, host 0's device l adds its host's
 *    copies in slot order (the prefix a0+…+a(L-1)) and sends it to host 1's
 *    device l, which adds its host's copies in order (read in place from its
 *    peers' slots) and passes it on; the last host divides (mean) and writes
 *    the final chunk into its slot. The finals go back along H-1 → 0 → 1 → …
 *    → H-2, each host writing them into its own slot and passing them on.
 *    One tick is one all-to-all among the H devices of index l (every
 *    receive posted before the sends: GlooCollective.allToAllV): it
 *    carries host h's prefix of chunk t-h forward and the finals of earlier
 *    chunks back (counts zero elsewhere), so the forward chain and the return
 *    overlap on every link in both directions; a chain of K chunks takes
 *    K + 2H - 3 ticks, and every host sends about 2/L of the buffer per device;
 * 3. local barrier, then every device copies the other shards from its local
 *    peers' slots (as `sharded` does), and a last barrier (nobody overwrites
 *    a slot a peer still reads).
 *
 * A buffer that is not a registered slot goes through the shared-memory
 * staging area in pieces, each reduced as above. All-gather: the local
 * all-gather fills this host's block of the result, which each device
 * all-gathers across hosts over its own context (host blocks in host order
 * are the global order). Broadcast from global rank g = host hr × L + lr: lr
 * broadcasts inside host hr, then every device broadcasts the range from host
 * hr over its context. Barrier: the local one, then each context's one (once
 * device l of every host passed it, every device of every host arrived).
 *
 * Waits beat the heartbeat (the shared barrier's slices; Gloo's onWait) and
 * fail as the two transports fail: STALLED, ABORTED, PEER_LOST naming the lost
 * peer's global rank and host (GlooCollective's translation). Without a world
 * (one process) it is the shared-memory transport; with one device per host,
 * the flat gloo transport (the same chain would add nothing).
 */
import { TandemError } from '../errors.js';
import { BlockingBackedCollective } from './collective.js';
import type { BlockingCollective, Collective, CollectiveEnv, ReduceOp, SlotSet } from './collective.js';
import type { CommunicatorSpec, PreparedCommunicator, RankHandle, Transport } from './transport.js';
import { shardOf } from './reduce-slots.js';
import {
  SHARED_MEMORY_TRANSPORT,
  SharedMemoryCollective,
  peerSlotsOf,
  type SharedMemoryData,
} from './shared-memory-transport.js';
import { GLOO_TRANSPORT, openGlooCollective, type GlooCollective, type GlooRankData } from './gloo-transport.js';
import { SharedBarrier } from './shared-barrier.js';

/** What one device needs (structured-cloneable): its host's shared memory and its context across hosts. */
export interface HierarchicalData {
  local: SharedMemoryData;
  cross: GlooRankData;
  host: number;
  hosts: number;
  /** Floats per chunk of the chain (default HIERARCHICAL_CHUNK_FLOATS). */
  chunkFloats: number;
}

/** Floats per chunk of the chain across hosts: one tick's message (512 KiB). */
export const HIERARCHICAL_CHUNK_FLOATS = 1 << 17;

export const HIERARCHICAL_TRANSPORT: Transport = {
  name: 'hierarchical',
  description:
    "several hosts: shared memory inside a host, Gloo between the hosts' devices of the same local index; the flat " +
    'rank-ordered bits',
  blocking: true,
  prepare(spec: CommunicatorSpec): PreparedCommunicator | Promise<PreparedCommunicator> {
    const world = spec.world;
    if (!world) return SHARED_MEMORY_TRANSPORT.prepare(spec);
    if (spec.size === 1) return GLOO_TRANSPORT.prepare(spec);
    if (world.worldSize % spec.size !== 0 || world.rankOffset % spec.size !== 0) {
      throw new TandemError(
        'BAD_CONFIG',
        `transport 'hierarchical' needs the same devices on every host: ${spec.size} here, ` +
          `${world.worldSize} in the world, this host's first rank ${world.rankOffset}`,
      );
    }
    return prepareHosts(spec, world.rankOffset / spec.size, world.worldSize / spec.size);
  },
  open(handle: RankHandle, env: CollectiveEnv): Collective {
    return new HierarchicalCollective(handle, handle.data as HierarchicalData, env);
  },
};

function prepareHosts(
  spec: CommunicatorSpec,
  host: number,
  hosts: number,
  chunkFloats = HIERARCHICAL_CHUNK_FLOATS,
): PreparedCommunicator {
  const world = spec.world!;
  const local = SHARED_MEMORY_TRANSPORT.prepare({ ...spec, world: undefined }).handles[0].data as SharedMemoryData;
  const handles: RankHandle[] = Array.from({ length: spec.size }, (_, l) => {
    const cross: GlooRankData = {
      store: world.store,
      prefix: `${world.key}.across.${l}`,
      hostname: world.hostname,
      crossHost: { stride: spec.size, offset: l },
      processKind: world.processKind,
    };
    const data: HierarchicalData = { local, cross, host, hosts, chunkFloats };
    return {
      transport: 'hierarchical',
      communicator: spec.name,
      rank: world.rankOffset + l,
      size: world.worldSize,
      data,
    };
  });
  return { handles, transfer: handles.map(() => []) };
}

/** One message of a tick of the chain: a prefix going forward, or a final chunk going back. */
export interface ChainMessage {
  from: number;
  to: number;
  kind: 'prefix' | 'final';
  chunk: number;
}

/** Ticks of a chain of `chunks` chunks over `hosts` hosts. */
export function chainTicks(hosts: number, chunks: number): number {
  return chunks === 0 ? 0 : chunks + 2 * hosts - 3;
}

/**
 * Every message of tick t (host h sends its prefix of chunk t-h; finals hop H-1 → 0 → … → H-2 one host per tick),
 * forward ones first.
 */
export function tickMessages(hosts: number, chunks: number, t: number): ChainMessage[] {
  const out: ChainMessage[] = [];
  for (let h = 0; h < hosts - 1; h++) {
    const chunk = t - h;
    if (chunk >= 0 && chunk < chunks) out.push({ from: h, to: h + 1, kind: 'prefix', chunk });
  }
  const route = (j: number) => (j === 0 ? hosts - 1 : j - 1);
  for (let j = 0; j < hosts - 1; j++) {
    const chunk = t - (hosts - 1) - j;
    if (chunk >= 0 && chunk < chunks) out.push({ from: route(j), to: route(j + 1), kind: 'final', chunk });
  }
  return out;
}

export class HierarchicalCollective extends BlockingBackedCollective {
  readonly transport = 'hierarchical';
  readonly rank: number;
  readonly size: number;
  readonly blocking: BlockingCollective;
  private readonly local: SharedMemoryCollective;
  private readonly cross: GlooCollective;
  private readonly gate: SharedBarrier;
  private readonly staging: Float32Array[];
  private readonly peers = new WeakMap<Float32Array, SlotSet>();
  private readonly localRank: number;
  private readonly localSize: number;
  private forward = new Float32Array(0);
  private sendBuf = new Float32Array(0);
  private recvBuf = new Float32Array(0);

  constructor(
    handle: RankHandle,
    private readonly data: HierarchicalData,
    env: CollectiveEnv,
  ) {
    super();
    this.rank = handle.rank;
    this.size = handle.size;
    this.localSize = handle.size / data.hosts;
    this.localRank = handle.rank - data.host * this.localSize;
    this.local = new SharedMemoryCollective(this.localRank, this.localSize, data.local, env);
    this.gate = new SharedBarrier(data.local.barrier, 0, this.localSize, env);
    const floats = data.local.stagingFloats;
    this.staging = Array.from(
      { length: this.localSize },
      (_, r) => new Float32Array(data.local.staging, r * floats * 4, floats),
    );
    this.cross = openGlooCollective(data.host, data.hosts, data.cross, env, handle.communicator);
    this.blocking = {
      allReduce: (buf, start, end, op) => this.allReduceNow(buf, start, end, op),
      allGather: (mine, all) => this.allGatherNow(mine, all),
      broadcast: (buf, root, start, end) => this.broadcastNow(buf, root, start, end),
      barrier: () => {
        this.gate.arrive('local peers at a barrier');
        this.cross.blocking.barrier();
      },
    };
  }

  close(): void {
    this.cross.close();
  }

  private allReduceNow(buf: Float32Array, start: number, end: number, op: ReduceOp): void {
    if (end <= start) return;
    const slots = this.peersOf(buf);
    if (slots) {
      this.reduceSlots(slots, start, end, op);
      return;
    }
    const mine = this.staging[this.localRank],
      piece = this.data.local.stagingFloats;
    for (let c = start; c < end; c += piece) {
      const len = Math.min(piece, end - c);
      mine.set(buf.subarray(c, c + len));
      this.reduceSlots(this.staging, 0, len, op);
      buf.set(mine.subarray(0, len), c);
    }
  }

  /** Every local slot holds op over every copy in the world on [start, end). */
  private reduceSlots(slots: SlotSet, start: number, end: number, op: ReduceOp): void {
    this.gate.arrive('local peers to hand over their copies (hierarchical all-reduce)');
    const [s, e] = shardOf(start, end, this.localRank, this.localSize);
    this.chain(slots, s, e, op);
    this.gate.arrive('local peers to bring their shards back from the other hosts');
    const mine = slots[this.localRank];
    for (let r = 0; r < this.localSize; r++) {
      if (r === this.localRank) continue;
      const [rs, re] = shardOf(start, end, r, this.localSize);
      mine.set(slots[r].subarray(rs, re), rs);
    }
    this.gate.arrive('local peers to finish gathering');
  }

  /** This device's shard [s, e) through the chain across hosts: afterwards its slot holds the world's result there. */
  private chain(slots: SlotSet, s: number, e: number, op: ReduceOp): void {
    const { host, hosts, chunkFloats } = this.data;
    const chunks = Math.ceil((e - s) / chunkFloats);
    const range = (chunk: number): [number, number] => [
      s + chunk * chunkFloats,
      Math.min(e, s + (chunk + 1) * chunkFloats),
    ];
    this.ensureBuffers(Math.min(chunkFloats, e - s));
    const mine = slots[this.localRank];
    for (let t = 0; t < chainTicks(hosts, chunks); t++) {
      if (host === 0 && t < chunks) accumulate(this.forward, slots, ...range(t), op, false);
      const messages = tickMessages(hosts, chunks, t);
      const sends = messages.filter(m => m.from === host).sort((a, b) => a.to - b.to);
      const receives = messages.filter(m => m.to === host).sort((a, b) => a.from - b.from);
      const inCounts = new Array<number>(hosts).fill(0),
        outCounts = new Array<number>(hosts).fill(0);
      let sent = 0,
        got = 0;
      for (const m of sends) {
        const [a, b] = range(m.chunk);
        this.sendBuf.set(m.kind === 'prefix' ? this.forward.subarray(0, b - a) : mine.subarray(a, b), sent);
        sent += b - a;
        inCounts[m.to] += b - a;
      }
      for (const m of receives) {
        const [a, b] = range(m.chunk);
        got += b - a;
        outCounts[m.from] += b - a;
      }
      this.cross.allToAllV(
        `the other hosts' partial results (hierarchical all-reduce ${op}, tick ${t + 1} of ` +
          `${chainTicks(hosts, chunks)})`,
        this.sendBuf.subarray(0, sent),
        inCounts,
        this.recvBuf.subarray(0, got),
        outCounts,
      );
      let at = 0;
      for (const m of receives) {
        const [a, b] = range(m.chunk);
        const part = this.recvBuf.subarray(at, at + b - a);
        at += b - a;
        if (m.kind === 'final') {
          mine.set(part, a);
          continue;
        }
        this.forward.set(part);
        accumulate(this.forward, slots, a, b, op, true);
        if (host === hosts - 1) finish(this.forward, mine, a, b, op, this.size);
      }
    }
  }

  private ensureBuffers(chunk: number): void {
    if (this.forward.length >= chunk) return;
    this.forward = new Float32Array(chunk);
    this.sendBuf = new Float32Array(2 * chunk);
    this.recvBuf = new Float32Array(2 * chunk);
  }

  private allGatherNow(mine: Float32Array, all: Float32Array): void {
    const m = mine.length;
    if (all.length !== m * this.size)
      throw new RangeError(`allGather: ${all.length} floats received for ${this.size} ranks of ${m}`);
    const block = m * this.localSize;
    const ours = all.subarray(this.data.host * block, (this.data.host + 1) * block);
    this.local.blocking.allGather(mine, ours);
    this.cross.blocking.allGather(Float32Array.from(ours), all);
  }

  private broadcastNow(buf: Float32Array, root: number, start: number, end: number): void {
    if (end <= start) return;
    if (!Number.isInteger(root) || root < 0 || root >= this.size)
      throw new RangeError(`broadcast: root ${root} is not a rank of ${this.size}`);
    const rootHost = Math.floor(root / this.localSize);
    if (this.data.host === rootHost) this.local.blocking.broadcast(buf, root - rootHost * this.localSize, start, end);
    this.cross.blocking.broadcast(buf, rootHost, start, end);
  }

  private peersOf(buf: Float32Array): SlotSet | undefined {
    const known = this.peers.get(buf);
    if (known) return known;
    const slots = peerSlotsOf(this.data.local.registered, this.localRank, this.localSize, buf);
    if (slots) this.peers.set(buf, slots);
    return slots;
  }
}

/**
 * acc[0, b-a) = op over (acc, when `carried`, then) every slot's [a, b), in slot order, rounding to float32 at every
 * step.
 */
function accumulate(acc: Float32Array, slots: SlotSet, a: number, b: number, op: ReduceOp, carried: boolean): void {
  const len = b - a;
  if (!carried) acc.set(slots[0].subarray(a, b));
  for (let r = carried ? 0 : 1; r < slots.length; r++) {
    const src = slots[r];
    if (op === 'max') for (let i = 0; i < len; i++) acc[i] = Math.max(acc[i], src[a + i]);
    else for (let i = 0; i < len; i++) acc[i] += src[a + i];
  }
}

/** out[a, b) = the final of the chain: acc / n for a mean (as `reduceSlotsInto`), acc otherwise. */
function finish(acc: Float32Array, out: Float32Array, a: number, b: number, op: ReduceOp, n: number): void {
  if (op !== 'mean') {
    out.set(acc.subarray(0, b - a), a);
    return;
  }
  for (let i = 0; i < b - a; i++) out[a + i] = acc[i] / n;
}
