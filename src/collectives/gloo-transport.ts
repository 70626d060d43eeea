/**
 * The gloo transport: every rank is one rank of a Gloo context (a full mesh of TCP pairs, the addon in native/gloo),
 * reached at an address — 127.0.0.1 for the threads of one process, a host's address across machines. The store the
 * ranks meet at is served by the process that prepares the communicator (tcp-store-server.ts), or any `tcp://` or
 * `file://` store named in the handle. One process's store has a secret of its own (a fresh one per communicator,
 * handed to its ranks in their handles), so no other process on the machine can read or write its keys.
 *
 * All-reduce gives the shared-memory transport's bits (element by element, float32 additions in rank order, then / N
 * for a mean): each rank reduces its shard of the buffer (`shardOf`) from every rank's copy, and the reduced shards go
 * to every rank. It moves what a ring moves (2(N-1)/N of the buffer per rank) without Gloo's ring order of additions.
 * Two algorithms:
 * - `pipelined` (the default, the addon's allReducePipelined, native/src/gloo-pipelined.cc): the buffer in chunks
 *   (`pipelineChunkFloats`, about 16 per buffer); every receive is posted before any send, every chunk's shards go out
 *   at once, and each reduced shard goes back as soon as its chunk's copies arrived, so both directions of every link
 *   stay busy. Between 2 hosts it reaches the plain-TCP rate (bench/hosts-line-rate.ts).
 * - `shards` (the first one): Gloo's all-to-all of the shards, the reduction here (the reference loops or the engine's
 *   reducer), then Gloo's all-gather. Gloo posts each send before its receive, so a rank's "ready to receive" notice
 *   can wait behind its own data on the TCP stream: between 2 hosts the two directions take turns, half the line rate.
 *
 * Every operation is synchronous for the calling thread (the rank's comm or compute thread), so `blocking` is offered;
 * the addon runs it on the context's own thread and the caller beats its heartbeat meanwhile, so the run's watchdog
 * never takes a rank waiting for a peer for a hung one. Gloo gives up after the communicator's timeout (STALLED); a
 * peer whose connection closes fails the operation at once (PEER_LOST, naming the peer's rank, and across processes its
 * host and address). An aborted run is seen before each operation and between chunks (ABORTED): a Gloo call in flight
 * cannot be interrupted, it ends with a peer's failure or the timeout. A context in which an operation failed is
 * closed.
 */
import { TandemError } from '../errors.js';
import { BlockingBackedCollective } from './collective.js';
import type { BlockingCollective, Collective, CollectiveEnv, ReduceOp, SlotReducer } from './collective.js';
import type { CommunicatorSpec, CommunicatorWorld, PreparedCommunicator, RankHandle, Transport } from './transport.js';
import { reduceMeanInto, reduceSlotsInto, shardOf } from './reduce-slots.js';
import { isGlooFailure, loadGlooAddon, GLOO_HOW_TO, type GlooContext, type GlooFailure } from './gloo/gloo-addon.js';
import { startStoreServer } from './gloo/tcp-store-server.js';
import { WAIT_SLICE_MS } from './shared-barrier.js';
import { describeProcess, type ProcessKind } from '../world/topology.js';
import { newJobSecret } from '../world/job-secret.js';

/** What a rank needs to join its Gloo context (structured-cloneable). */
export interface GlooRankData {
  /** `tcp://host:port` or `file:///dir`. */
  store: string;
  /** The communicator's keys in the store (unique in the job). */
  prefix: string;
  /** The address this rank listens on. */
  hostname: string;
  /** Floats reduced per all-to-all (default GLOO_CHUNK_FLOATS). */
  chunkFloats?: number;
  /** Several processes: ranks per process, so that a lost peer is named with its host (rank / ranksPerProcess). */
  ranksPerProcess?: number;
  /** What the processes are, as errors name them (`describeProcess`): hosts (absent) or GPU processes. */
  processKind?: ProcessKind;
  /**
   * One rank per host (the hierarchical transport's contexts across hosts): context rank q is host q and global
   * rank q * stride + offset, as errors name it.
   */
  crossHost?: { stride: number; offset: number };
  /** How all-reduce moves the bytes (default GLOO_DEFAULT_ALGORITHM). */
  algorithm?: GlooAllReduceAlgorithm;
  /** One process's communicator: its store's own secret (it never leaves the process; absent: the job's). */
  secret?: string;
  /** Floats per chunk of the pipelined algorithm (default: pipelineChunkFloats(), from the buffer's length). */
  pipelineChunkFloats?: number;
}

/** How the gloo collective's all-reduce moves the bytes (see the top of this file). */
export type GlooAllReduceAlgorithm = 'shards' | 'pipelined';
export const GLOO_DEFAULT_ALGORITHM: GlooAllReduceAlgorithm = 'pipelined';
/** The pipelined algorithm's smallest chunk (256 KiB). */
export const GLOO_PIPELINE_CHUNK_FLOATS = 1 << 16;
/**
 * Chunks a large buffer is cut in: more cost CPU per byte (a wake-up and ~4 messages each; on loopback 23 MB in chunks
 * of 64K floats took 1.7x as long as in 1M-float ones), fewer pipeline less.
 */
export const GLOO_PIPELINE_CHUNKS = 16;

/**
 * The pipelined algorithm's chunk for a buffer of `floats`: 1/GLOO_PIPELINE_CHUNKS of it, at least
 * GLOO_PIPELINE_CHUNK_FLOATS.
 */
export function pipelineChunkFloats(floats: number): number {
  return Math.max(GLOO_PIPELINE_CHUNK_FLOATS, Math.ceil(floats / GLOO_PIPELINE_CHUNKS));
}

/** Floats of a buffer reduced per all-to-all (bounds the scratch to about 4 bytes × this). */
export const GLOO_CHUNK_FLOATS = 1 << 22;

/** The all-reduce's settings (GlooRankData's). */
export interface GlooAllReduceOptions {
  chunkFloats?: number;
  algorithm?: GlooAllReduceAlgorithm;
  pipelineChunkFloats?: number;
}

let communicators = 0;

export const GLOO_TRANSPORT: Transport = {
  name: 'gloo',
  description:
    'Gloo over TCP (libgloo-dev): ranks reach each other at network addresses, 127.0.0.1 inside one process; ' +
    'rank-ordered sums',
  blocking: true,
  async prepare(spec: CommunicatorSpec): Promise<PreparedCommunicator> {
    if (spec.world) return worldHandles(spec, spec.world);
    const secret = newJobSecret(); // or any local user could read and write its keys: the pairs' addresses
    const server = await startStoreServer({
      host: '127.0.0.1',
      closeAfterClients: spec.size,
      secret: Buffer.from(secret),
    });
    const data: GlooRankData = {
      secret,
      store: server.url,
      prefix: `${spec.name}.${process.pid}.${++communicators}`,
      hostname: '127.0.0.1',
    };
    const handles: RankHandle[] = Array.from({ length: spec.size }, (_, rank) => ({
      transport: 'gloo',
      communicator: spec.name,
      rank,
      size: spec.size,
      data,
    }));
    return { handles, transfer: handles.map(() => []) };
  },
  open(handle: RankHandle, env: CollectiveEnv): Collective {
    return openGlooCollective(handle.rank, handle.size, handle.data as GlooRankData, env, handle.communicator);
  },
};

/** This process's ranks of a communicator spanning processes: the store is the job's (host 0's), not served here. */
function worldHandles(spec: CommunicatorSpec, world: CommunicatorWorld): PreparedCommunicator {
  const data: GlooRankData = {
    store: world.store,
    prefix: world.key,
    hostname: world.hostname,
    ranksPerProcess: world.ranksPerProcess,
    processKind: world.processKind,
  };
  const handles: RankHandle[] = Array.from({ length: spec.size }, (_, local) => ({
    transport: 'gloo',
    communicator: spec.name,
    rank: world.rankOffset + local,
    size: world.worldSize,
    data,
  }));
  return { handles, transfer: handles.map(() => []) };
}

/** Joins the Gloo context of `data` as `rank` of `size` (blocks until every rank joined, or the timeout). */
export function openGlooCollective(
  rank: number,
  size: number,
  data: GlooRankData,
  env: CollectiveEnv,
  name = 'gloo',
): GlooCollective {
  const load = loadGlooAddon();
  if (!load.loaded)
    throw new TandemError('BAD_CONFIG', `transport 'gloo' is not available: ${load.reason}. To get it, ${GLOO_HOW_TO}`);
  if (env.isAborted()) throw new TandemError('ABORTED', 'run aborted by another thread');
  try {
    const context = new load.addon.GlooContext({
      rank,
      size,
      store: data.store,
      prefix: data.prefix,
      hostname: data.hostname,
      timeoutMs: env.timeoutMs,
      ...(data.secret !== undefined ? { secret: data.secret } : {}),
      onWait: () => env.heartbeat?.(),
      waitSliceMs: WAIT_SLICE_MS,
    });
    context.connect();
    return new GlooCollective(
      context,
      env,
      { chunkFloats: data.chunkFloats, algorithm: data.algorithm, pipelineChunkFloats: data.pipelineChunkFloats },
      peerNaming(data),
    );
  } catch (err) {
    if (!isGlooFailure(err)) throw err;
    const code = err.glooKind === 'invalid' ? 'BAD_CONFIG' : 'STALLED';
    const who = data.crossHost
      ? `${describeProcess(data, rank)} (global rank ${rank * data.crossHost.stride + data.crossHost.offset})`
      : `rank ${rank}`;
    throw new TandemError(
      code,
      `gloo ${who} of ${size} could not join communicator '${name}' (store ${data.store}, ` +
        `listening on ${data.hostname}) within ${(env.timeoutMs / 1000).toFixed(1)} s: ${err.message}`,
      undefined,
      { cause: err },
    );
  }
}

export class GlooCollective extends BlockingBackedCollective {
  readonly transport = 'gloo';
  readonly rank: number;
  readonly size: number;
  readonly blocking: BlockingCollective;
  private readonly reducer: SlotReducer;
  private readonly chunkFloats: number;
  private readonly algorithm: GlooAllReduceAlgorithm;
  private readonly pipelineChunkFloats: number | undefined;
  private scratch = new Float32Array(0);
  private open = true;

  constructor(
    private readonly context: GlooContext,
    private readonly env: CollectiveEnv,
    options: GlooAllReduceOptions = {},
    private readonly naming: PeerNaming = FLAT_NAMING,
  ) {
    super();
    this.rank = context.rank;
    this.size = context.size;
    this.chunkFloats = options.chunkFloats ?? GLOO_CHUNK_FLOATS;
    this.algorithm = options.algorithm ?? GLOO_DEFAULT_ALGORITHM;
    this.pipelineChunkFloats = options.pipelineChunkFloats;
    this.reducer = env.reducer ?? { reduceMeanInto };
    this.blocking = {
      allReduce: (buf, start, end, op) => this.allReduceNow(buf, start, end, op),
      allGather: (mine, all) => this.allGatherNow(mine, all),
      broadcast: (buf, root, start, end) => this.broadcastNow(buf, root, start, end),
      barrier: () => this.run('a barrier', () => this.context.barrier()),
    };
  }

  close(): void {
    this.open = false;
    this.context.close();
  }

  private allReduceNow(buf: Float32Array, start: number, end: number, op: ReduceOp): void {
    if (this.size === 1 || end <= start) return;
    for (let c = start; c < end; c += this.chunkFloats) {
      const view = buf.subarray(c, Math.min(end, c + this.chunkFloats));
      switch (this.algorithm) {
        case 'pipelined':
          this.run(`peers' shards (pipelined all-reduce ${op})`, () =>
            this.context.allReducePipelined(view, op, this.pipelineChunkFloats ?? pipelineChunkFloats(view.length)),
          );
          break;
        case 'shards':
          this.allReduceChunk(view, op);
          break;
        default: {
          const never: never = this.algorithm;
          throw new TandemError('BAD_CONFIG', `unknown gloo all-reduce algorithm '${String(never)}'`);
        }
      }
    }
  }

  /** Reduce-scatter (all-to-all of the shards, rank-ordered reduction of mine), then all-gather of the shards. */
  private allReduceChunk(view: Float32Array, op: ReduceOp): void {
    const counts = Array.from({ length: this.size }, (_, r) => {
      const [s, e] = shardOf(0, view.length, r, this.size);
      return e - s;
    });
    const mine = counts[this.rank];
    if (this.scratch.length < this.size * mine) this.scratch = new Float32Array(this.size * mine);
    const received = this.scratch.subarray(0, this.size * mine);
    this.run(`peers' shards (all-reduce ${op})`, () =>
      this.context.allToAllV(
        view,
        counts,
        received,
        counts.map(() => mine),
      ),
    );
    const slots = counts.map((_, r) => received.subarray(r * mine, (r + 1) * mine));
    if (op === 'mean') this.reducer.reduceMeanInto(slots, slots[0], 0, mine);
    else reduceSlotsInto(slots, slots[0], 0, mine, op);
    this.run(`peers' reduced shards (all-reduce ${op})`, () => this.context.allGatherV(slots[0], view, counts));
  }

  private allGatherNow(mine: Float32Array, all: Float32Array): void {
    if (all.length !== mine.length * this.size)
      throw new RangeError(`allGather: ${all.length} floats received for ${this.size} ranks of ${mine.length}`);
    if (this.size === 1) {
      all.set(mine);
      return;
    }
    this.run("peers' parts (all-gather)", () => this.context.allGather(mine, all));
  }

  private broadcastNow(buf: Float32Array, root: number, start: number, end: number): void {
    if (this.size === 1 || end <= start) return;
    this.run(`rank ${root}'s values (broadcast)`, () => this.context.broadcast(buf.subarray(start, end), root));
  }

  /**
   * An all-to-all with every receive posted first (the addon's `exchangeV`), with this collective's checks and error
   * translation, for a transport composed on top of it (hierarchical-transport.ts); `what` says what the rank waits
   * for, in errors.
   */
  allToAllV(what: string, input: Float32Array, inCounts: number[], output: Float32Array, outCounts: number[]): void {
    this.run(what, () => this.context.exchangeV(input, inCounts, output, outCounts));
  }

  /** One Gloo call: ABORTED before it when the run aborted; its failure as a TandemError (and the context closed). */
  private run(what: string, call: () => void): void {
    if (!this.open)
      throw new TandemError(
        'ABORTED',
        `gloo ${this.naming.self(this.rank)}: the communicator is closed (a previous operation failed or it was ` +
          `closed)`,
      );
    if (this.env.isAborted()) throw new TandemError('ABORTED', 'run aborted by another thread');
    this.env.heartbeat?.();
    try {
      translated(this.naming.self(this.rank), `waiting for ${what}`, this.env.timeoutMs, call, this.naming);
    } catch (err) {
      this.close();
      throw err;
    }
  }
}

/** How errors name this rank and a peer (by the context's rank). */
interface PeerNaming {
  self(rank: number): string;
  peer(rank: number, address?: string): string;
}
const FLAT_NAMING: PeerNaming = { self: rank => `rank ${rank}`, peer: rank => `peer rank ${rank}` };

function peerNaming(data: GlooRankData): PeerNaming {
  const { ranksPerProcess, crossHost } = data;
  const at = (address?: string) => (address ? `, ${address}` : '');
  if (crossHost) {
    const global = (q: number) => q * crossHost.stride + crossHost.offset;
    return {
      self: q => `rank ${global(q)} (${describeProcess(data, q)})`,
      peer: (q, address) => `peer rank ${global(q)} (${describeProcess(data, q)}${at(address)})`,
    };
  }
  if (ranksPerProcess)
    return {
      self: FLAT_NAMING.self,
      peer: (q, address) => `peer rank ${q} (${describeProcess(data, Math.floor(q / ranksPerProcess))}${at(address)})`,
    };
  return FLAT_NAMING;
}

/** Runs a Gloo call, turning the addon's failure into a TandemError with a code and the peer's rank. */
function translated<T>(self: string, what: string, timeoutMs: number, call: () => T, naming: PeerNaming): T {
  try {
    return call();
  } catch (err) {
    if (!isGlooFailure(err)) throw err;
    const peer = err.peerRank >= 0 ? naming.peer(err.peerRank, peerAddress(err)) : 'a peer';
    switch (err.glooKind) {
      case 'timeout':
        throw new TandemError(
          'STALLED',
          `gloo ${self}: ${peer} did not answer within ${(timeoutMs / 1000).toFixed(1)} s ` +
            `while ${what} (raise stallTimeoutMs if steps are legitimately this slow): ${err.message}`,
          undefined,
          { cause: err },
        );
      case 'peer':
      case 'io':
        throw new TandemError('PEER_LOST', `gloo ${self}: lost ${peer} while ${what}: ${err.message}`, undefined, {
          cause: err,
        });
      case 'closed':
        throw new TandemError('ABORTED', `gloo ${self}: the communicator is closed`, undefined, { cause: err });
      case 'invalid':
        throw new TandemError('BAD_CONFIG', `gloo ${self}: ${err.message}`, undefined, { cause: err });
      default: {
        const never: never = err.glooKind;
        throw new Error(`unknown gloo failure ${String(never)}`);
      }
    }
  }
}

/** The address the addon names a failure's peer by (`peer rank R ([ADDR]:PORT)` in its message), if it does. */
function peerAddress(err: GlooFailure): string | undefined {
  return new RegExp(`peer rank ${err.peerRank} \\(\\[?([^\\]\\s()]+?)\\]?:\\d+\\)`).exec(err.message)?.[1];
}
