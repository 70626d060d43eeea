/**
 * How the processes of one machine come to share one shm segment, on each
 * process's main thread when the communicator is prepared. Through the job's
 * rendezvous store: every process posts its machine identity (machine id,
 * boot id, IPC namespace, /dev/shm) and address — a process on another machine
 * is refused by name (BAD_CONFIG); process 0 first creates the segment under a
 * name no other run uses (the rendezvous port, the communicator, its pid and a
 * random part) and posts it; the others map it; the last to map unlinks the
 * name, so nothing stays in /dev/shm whatever happens afterwards (the mappings
 * live until the processes end). A process that never comes or never maps it
 * leaves the others STALLED after the setup timeout, and they unlink the name
 * themselves.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, readlinkSync, statSync } from 'node:fs';
import { TandemError } from '../../errors.js';
import type { CommunicatorWorld } from '../transport.js';
import { StoreClient, parseStoreUrl } from '../gloo/tcp-store-client.js';
import type { ShmAddon } from './shm-addon.js';
import { MAGIC, W_MAGIC, W_RANKS, type SegmentLayout } from './segment-layout.js';
import { describeProcess } from '../../world/topology.js';

/** How long a process waits by default for the others to post and map (the store's waits). */
export const SHM_SETUP_TIMEOUT_MS = 120_000;

export interface MetSegment {
  segment: SharedArrayBuffer;
  /** Process p's address (its hostname in the world), for messages. */
  addresses: string[];
}

interface ProcessRecord {
  machine: string;
  address: string;
  pid: number;
}

let segments = 0;

/** One process: a segment of its own, unlinked at once (its threads get it through their handles). */
export function privateSegment(addon: ShmAddon, layout: SegmentLayout, what: string): MetSegment {
  const name = `/tandem-${process.pid}-${++segments}-${safe(what)}-${randomBytes(4).toString('hex')}`;
  const segment = addon.create(name, layout.bytes);
  addon.unlink(name);
  initialise(segment, layout);
  Atomics.store(new Int32Array(segment), layout.pidWord, process.pid);
  return { segment, addresses: [] };
}

/** Every process of `world` maps the same segment (this is process world.rankOffset / layout.ranksPerProcess). */
export async function meetOnSegment(
  addon: ShmAddon,
  layout: SegmentLayout,
  world: CommunicatorWorld,
  timeoutMs = SHM_SETUP_TIMEOUT_MS,
): Promise<MetSegment> {
  const client = await StoreClient.connect(world.store, timeoutMs);
  const p = world.rankOffset / layout.ranksPerProcess,
    key = `${world.key}.shm`;
  let name: string | undefined;
  try {
    let segment: SharedArrayBuffer | undefined;
    if (p === 0) {
      const unique = `${process.pid}-${randomBytes(4).toString('hex')}`;
      name = `/tandem-${parseStoreUrl(world.store).port}-${safe(world.key)}-${unique}`;
      segment = addon.create(name, layout.bytes);
      initialise(segment, layout);
      await client.set(`${key}.name`, name);
    }
    const mine: ProcessRecord = { machine: machineIdentity(), address: world.hostname, pid: process.pid };
    await client.set(`${key}.process.${p}`, JSON.stringify(mine));
    const records: ProcessRecord[] = [];
    for (let q = 0; q < layout.processes; q++)
      records.push(JSON.parse((await client.get(`${key}.process.${q}`)).toString()) as ProcessRecord);
    refuseOtherMachines(records, p);
    if (!segment) {
      name = (await client.get(`${key}.name`)).toString();
      const opened = addon.open(name, layout.bytes);
      if (!opened)
        throw new TandemError(
          'BAD_CONFIG',
          `shm: ${describeProcess(world, p)} cannot open ${describeProcess(world, 0)}'s segment ${name} of ` +
            `${layout.bytes} bytes (is /dev/shm shared between them?)`,
        );
      segment = opened;
    }
    Atomics.store(new Int32Array(segment), layout.pidWord + p, process.pid);
    if ((await client.add(`${key}.mapped`, 1)) === layout.processes) {
      addon.unlink(name!);
      await client.set(`${key}.unlinked`, '1');
    } else {
      await client.get(`${key}.unlinked`);
    }
    return { segment, addresses: records.map(r => r.address) };
  } catch (err) {
    if (name) addon.unlink(name);
    if (err instanceof TandemError && err.code === 'BAD_CONFIG') throw err;
    throw new TandemError(
      'STALLED',
      `shm: ${describeProcess(world, p)} could not meet the other ${layout.processes - 1} process(es) on a ` +
        `shared-memory segment ` +
        (`through the store ${world.store} within ${(timeoutMs / 1000).toFixed(1)} s (did every host start, and stay ` +
          `up?): ${(err as Error).message}`),
      undefined,
      { cause: err },
    );
  } finally {
    client.close();
  }
}

function initialise(segment: SharedArrayBuffer, layout: SegmentLayout): void {
  const words = new Int32Array(segment);
  Atomics.store(words, W_RANKS, layout.ranks);
  Atomics.store(words, W_MAGIC, MAGIC);
}

function refuseOtherMachines(records: ProcessRecord[], p: number): void {
  const other = records.findIndex(r => r.machine !== records[p].machine);
  if (other < 0) return;
  throw new TandemError(
    'BAD_CONFIG',
    `transport 'shm' joins the processes of one machine, but host ${other} (${records[other].address}) is on ` +
      `another machine than host ${p} (${records[p].address}); use --transport hierarchical or gloo across machines`,
  );
}

/** This machine as the kernel sees it: processes with the same identity share /dev/shm and futexes. */
export function machineIdentity(): string {
  const read = (f: string) => {
    try {
      return readFileSync(f, 'utf8').trim();
    } catch {
      return '';
    }
  };
  const link = (f: string) => {
    try {
      return readlinkSync(f);
    } catch {
      return '';
    }
  };
  const shm = (() => {
    try {
      const s = statSync('/dev/shm');
      return `${s.dev}:${s.ino}`;
    } catch {
      return '';
    }
  })();
  return [read('/etc/machine-id'), read('/proc/sys/kernel/random/boot_id'), link('/proc/self/ns/ipc'), shm].join('/');
}

function safe(text: string): string {
  return text.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 64);
}
