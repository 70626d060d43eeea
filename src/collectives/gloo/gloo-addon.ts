/**
 * The optional Gloo addon (native/gloo, built by node-gyp at install when
 * Gloo's headers are present: Debian's libgloo-dev). Loaded once per thread;
 * when it is missing, `loadGlooAddon` says why instead of throwing.
 *
 * A `GlooContext` is one rank's end of a full mesh of TCP pairs. Its
 * collectives are synchronous for the calling thread (a rank's comm or compute
 * thread), on Float32Arrays (SharedArrayBuffer-backed too): each runs on the
 * context's own native thread while the caller waits, calling `onWait` every
 * slice. A call in flight cannot be interrupted: it ends with its result, a
 * peer's failure or the timeout. Errors carry `glooKind` and `peerRank` (see
 * `GlooFailure`).
 */
import { fileURLToPath } from 'node:url';
import { loadAddonAt, REBUILD_COMMAND, type AddonLoad } from '../../addon-load.js';

export interface GlooContextOptions {
  rank: number;
  size: number;
  /** `tcp://host:port` (tandem's store, tcp-store-server.ts) or `file:///shared/dir` (Gloo's FileStore). */
  store: string;
  /** Keys of this context in the store; unique per communicator of a job. */
  prefix: string;
  /** The address this rank's pairs listen on (an address of this host that the peers reach). */
  hostname: string;
  /** Rendezvous, connection and every operation give up after this. */
  timeoutMs: number;
  /** The store's secret (default: TANDEM_JOB_SECRET; neither: a store without one). */
  secret?: string;
  /** Called every `waitSliceMs` (default 50) while a call is in flight: the calling thread's proof of life. */
  onWait?: () => void;
  waitSliceMs?: number;
}

export interface GlooContext {
  readonly rank: number;
  readonly size: number;
  /** Meets the other ranks at the store and connects a pair to each (blocks until all joined, or the timeout). */
  connect(): void;
  /** How Gloo names rank q's end of this rank's pair with q ('' for this rank). */
  readonly peers: string[];
  /** Gloo's ring all-reduce in place: fast, but its sums are not in rank order. */
  allReduce(buf: Float32Array, op: 'sum' | 'max'): void;
  /** all[r * mine.length ...] = rank r's mine. */
  allGather(mine: Float32Array, all: Float32Array): void;
  /** all = the ranks' `mine` one after the other, rank r's of counts[r] floats. */
  allGatherV(mine: Float32Array, all: Float32Array, counts: number[]): void;
  /**
   * Rank r's input[in offset q, inCounts[q]) goes to rank q; output holds what each rank sent this one, in rank order.
   */
  allToAllV(input: Float32Array, inCounts: number[], output: Float32Array, outCounts: number[]): void;
  /**
   * buf = op over every rank's buf, element by element in rank order (float32, / size for a mean, max as Math.max):
   * reduceSlotsInto's bits; pipelined in chunks of `chunkFloats` (native/src/gloo-pipelined.cc).
   */
  allReducePipelined(buf: Float32Array, op: 'sum' | 'mean' | 'max', chunkFloats: number): void;
  /**
   * allToAllV with every receive posted before the sends (no "ready to receive" notice waits behind this rank's data).
   */
  exchangeV(input: Float32Array, inCounts: number[], output: Float32Array, outCounts: number[]): void;
  broadcast(buf: Float32Array, root: number): void;
  barrier(): void;
  /** Closes every pair (the peers see the connection close). Idempotent. */
  close(): void;
}

export interface GlooAddon {
  GlooContext: new (options: GlooContextOptions) => GlooContext;
  version: string;
}

/** What the addon attaches to the errors it throws. */
export type GlooFailureKind = 'timeout' | 'peer' | 'io' | 'invalid' | 'closed';
export interface GlooFailure extends Error {
  glooKind: GlooFailureKind;
  peerRank: number;
}

export function isGlooFailure(err: unknown): err is GlooFailure {
  return err instanceof Error && typeof (err as Partial<GlooFailure>).glooKind === 'string';
}

export type GlooAddonLoad = AddonLoad<GlooAddon>;

/** How to get the gloo transport, for messages. */
export const GLOO_HOW_TO = `install Gloo (Debian/Ubuntu: apt-get install libgloo-dev) and run ${REBUILD_COMMAND}`;

// This file runs from dist/src/collectives/gloo/: the addon is built in <package>/native/gloo/build/Release/.
const DEFAULT_PATH = fileURLToPath(new URL('../../../../native/gloo/build/Release/tandem_gloo.node', import.meta.url));

let cached: GlooAddonLoad | undefined;

/** Loads the addon (once per thread). `TANDEM_GLOO_ADDON` overrides its path. */
export function loadGlooAddon(): GlooAddonLoad {
  if (cached) return cached;
  const path = process.env.TANDEM_GLOO_ADDON || DEFAULT_PATH;
  cached = loadAddonAt<GlooAddon>('gloo', path, addon =>
    typeof addon.GlooContext === 'function' && typeof addon.GlooContext.prototype.allReducePipelined === 'function'
      ? undefined
      : '',
  );
  return cached;
}
