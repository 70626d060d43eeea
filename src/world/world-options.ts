/** The world section of a train config: devices, hosts, and how their collectives reach each other. */
import type { OptionTable } from '../options/declaration.js';
import { choice, nonEmpty, positiveInt } from '../options/option-checks.js';
import { ALL_REDUCE_KINDS, type AllReduceKind } from '../collectives/collective.js';

/** Devices per host: the most one process runs. */
export const MAX_LOCAL_DEVICES = 64;

export interface WorldOptions {
  /** Devices per host (the world is hosts × devices). Default 2. */
  devices?: number;
  /** Processes (hosts) in the job, each with `devices` devices. Default 1. */
  hosts?: number;
  /**
   * This process's rank among the hosts, in [0, hosts). Host 0 serves the rendezvous store and alone writes
   * outputs.
   */
  hostRank?: number;
  /** hosts > 1: `HOST:PORT` where host 0 serves the store every rank meets at. */
  rendezvous?: string;
  /**
   * How the devices' collectives reach each other: a registered transport. Default `shared-memory`; several hosts:
   * `shm` when the rendezvous is a loopback address (one machine), else `hierarchical` (`gloo` with one device per
   * host).
   */
  transport?: string;
  allReduce?: AllReduceKind;
  /**
   * Who updates the parameters of one process's devices: `replica` (default) — each device all-reduces the whole
   * group and updates its own replica; `shard` — each device's comm thread reduces 1/N of a group's gradient, updates
   * that 1/N of the parameters and optimizer state once, and writes it into every replica. The same bits either way.
   * `shard` applies with the in-process `shared-memory` transport, the `sharded` all-reduce, no comm hook, the `ready`
   * exchange order and `onNan: 'error'`; elsewhere the run updates per replica.
   */
  localUpdate?: 'shard' | 'replica';
  /**
   * hosts > 1: a file holding the job's secret (else TANDEM_JOB_SECRET; `tandem launch` makes one for the hosts it
   * starts): every connection to host 0's store and monitor hub proves it (docs/guide/security.md).
   */
  jobSecretFile?: string;
  /** hosts > 1 without a job secret: run anyway, every process that reaches host 0's ports admitted. */
  insecure?: boolean;
  /**
   * hosts > 1: an elastic run. When a host is lost and at least this many remain, the survivors drop it and go on in
   * memory from the last step they all completed, the global batch re-split over the devices that remain
   * (docs/guide/elastic.md). Absent: a lost host ends the run.
   */
  minHosts?: number;
}

/** Devices per host when `devices` is not given. */
export const DEFAULT_DEVICES = 2;

export const WORLD_OPTIONS: OptionTable<WorldOptions> = {
  devices: {
    kind: 'integer',
    group: 'world',
    hosts: 'same',
    default: String(DEFAULT_DEVICES),
    doc: 'devices per host; the world is hosts × devices',
    check: positiveInt(MAX_LOCAL_DEVICES),
  },
  hosts: {
    kind: 'integer',
    group: 'world',
    hosts: 'same',
    default: '1',
    doc: 'processes (hosts) in the job, each with --devices',
  },
  hostRank: {
    kind: 'integer',
    group: 'world',
    hosts: "own: each host's own rank",
    arg: 'R',
    default: '0',
    doc: "this process's rank among the hosts",
  },
  rendezvous: {
    kind: 'string',
    group: 'world',
    hosts: "own: each machine may name host 0's address its own way",
    arg: 'HOST:PORT',
    doc: "several hosts: host 0's address; host 0 serves the store there",
  },
  transport: {
    kind: 'string',
    group: 'world',
    hosts: 'same',
    arg: 'NAME',
    default: 'shared-memory; several hosts: shm on loopback, else hierarchical (gloo with one device)',
    doc: 'a registered transport the collectives run over',
    check: nonEmpty('must be the name of a registered transport'),
  },
  allReduce: {
    kind: 'string',
    group: 'world',
    hosts: 'same',
    choices: ALL_REDUCE_KINDS,
    default: 'sharded',
    doc: 'sharded reduce-scatter + all-gather, or reduce on the primary device + broadcast',
    check: choice(ALL_REDUCE_KINDS),
  },
  localUpdate: {
    kind: 'string',
    group: 'world',
    hosts: 'same',
    choices: ['shard', 'replica'],
    default: 'replica',
    doc: "shard: each device updates 1/N of the parameters once, into every replica (one process's devices)",
    check: choice(['shard', 'replica'] as const),
  },
  jobSecretFile: {
    kind: 'string',
    group: 'world',
    hosts: 'own: a path on this machine; host 0 checks the secret each host proves',
    arg: 'FILE',
    default: 'TANDEM_JOB_SECRET',
    doc: "several hosts: the job's secret every host proves to host 0 (docs/guide/security.md)",
    check: nonEmpty('must be the path of a file holding the job secret'),
  },
  minHosts: {
    kind: 'integer',
    group: 'world',
    hosts: 'same',
    arg: 'M',
    default: 'none: a lost host ends the run',
    doc: 'several hosts: go on without a lost host while at least M remain (docs/guide/elastic.md)',
    check: positiveInt(1024),
  },
  insecure: {
    kind: 'boolean',
    group: 'world',
    hosts: "own: host 0 checks a host's secret when it connects",
    doc: 'several hosts without a job secret: admit any process that reaches host 0 (trusted networks only)',
  },
};
