/**
 * What a transport is: a named way for the ranks of a communicator to reach
 * each other. The main thread prepares a communicator once (allocates shared
 * memory, makes channels, names a rendezvous) and hands each rank a
 * `RankHandle`; the rank's own thread opens its `Collective` from it. A new
 * transport is one file that exports a `Transport` and registers it
 * (`registerTransport`), from the library or from a plugin module.
 */
import type { Transferable } from 'node:worker_threads';
import type { AllReduceKind, Collective, CollectiveEnv } from './collective.js';
import type { ProcessKind } from '../world/topology.js';
import type { AnyOptionTable } from '../options/declaration.js';

/** A SharedArrayBuffer of `slots` equal slots of `slotFloats` floats: slot r is rank r's copy. */
export interface SlotBuffer {
  buffer: SharedArrayBuffer;
  slotFloats: number;
  slots: number;
}

export interface TransportOptions {
  /** Shared memory: the all-reduce algorithm (the same bits either way). */
  allReduce: AllReduceKind;
  /** The values of the options plugins and registered parts declared (a plugin transport's own among them), by key. */
  pluginOptions?: Readonly<Record<string, unknown>>;
}

/** One communicator, as the main thread asks for it. */
export interface CommunicatorSpec {
  /** What it is for, in messages: `gradients` (comm threads) or `compute` (compute threads). */
  name: string;
  /** Its ranks in this process. */
  size: number;
  /**
   * Buffers whose rank-r slot a rank may pass as its buffer: a transport that can use them in place
   * (shared memory) does; the others treat them as any buffer.
   */
  registered: SlotBuffer[];
  /** Floats per rank of the staging area for buffers that are not registered (a hint; larger ones go in chunks). */
  stagingFloats: number;
  options: TransportOptions;
  /**
   * Several processes: this process's ranks are `rankOffset .. rankOffset + size - 1` of a communicator of
   * `worldSize` ranks, meeting at `store` (served by host 0). A transport that reaches only one process
   * refuses it (BAD_CONFIG); absent, the communicator is this process's `size` ranks.
   */
  world?: CommunicatorWorld;
}

export interface CommunicatorWorld {
  /** `tcp://host:port` (host 0's store). */
  store: string;
  rankOffset: number;
  worldSize: number;
  /** The address this process's ranks listen on for their peers. */
  hostname: string;
  /** Ranks per process (to name a lost peer's host). */
  ranksPerProcess: number;
  /** What the processes are, as errors name them (`describeProcess`): hosts (absent) or GPU processes. */
  processKind?: ProcessKind;
  /** Unique in the job, the same on every host (the communicator's keys in the store). */
  key: string;
}

/** What one rank needs to open its end: structured-cloneable data, posted to its thread. */
export interface RankHandle {
  transport: string;
  communicator: string;
  rank: number;
  size: number;
  data: unknown;
}

export interface PreparedCommunicator {
  handles: RankHandle[];
  /** Per rank: objects to transfer (not copy) with its handle, e.g. MessagePorts. */
  transfer: Transferable[][];
}

export interface Transport {
  readonly name: string;
  /** One line for `--help` and errors. */
  readonly description: string;
  /** Whether its collectives offer `blocking` (needed by methods that communicate inside forward/backward). */
  readonly blocking: boolean;
  /** Options the transport reads from the train config, declared (flags, help, known keys): a plugin's own. */
  readonly options?: AnyOptionTable;
  /** Main thread, before any rank opens (a promise when it must wait, e.g. for a rendezvous store to listen). */
  prepare(spec: CommunicatorSpec): PreparedCommunicator | Promise<PreparedCommunicator>;
  /** On the rank's thread. */
  open(handle: RankHandle, env: CollectiveEnv): Collective;
}
