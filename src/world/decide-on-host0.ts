/**
 * A decision host 0 alone makes before the run starts (`--strategy auto`
 * profiles there), sent to every host over the rendezvous store: host 0
 * serves the store from here on and hands it to the run; the other hosts wait
 * for host 0's decision as long as it takes (a host 0 that dies closes the
 * connection and fails them at once). With `measureLink`, every host first
 * times all-reduces across the host link together (link-probe.ts) and host 0
 * decides knowing it. Every host learns how many hosts share its machine
 * (machine-id.ts): `decide` and `alongside` get that count of their own host,
 * and `meet`, a meeting point of every host (a measurement they make at once).
 */
import type { ResolvedConfig } from '../config-types.js';
import type { StoreServer } from '../collectives/gloo/tcp-store-server.js';
import { HostChannel } from './host-channel.js';
import { addressTowards, serveRendezvous, storeUrl } from './rendezvous.js';
import { peerWaitMs } from './peer-wait.js';
import { probeHostLink } from './link-probe.js';
import type { LinkCost } from '../profiling/link-fit.js';
import { machineId } from './machine-id.js';
import { hostFlags } from './host-flags.js';

/** How long the other hosts wait for host 0's decision (its profiling). */
const DECISION_WAIT_MS = 30 * 60_000;
/** How long a host waits for host 0's store to listen (the run's setup watchdog). */
const REACH_MS = 60_000;

export interface Decided<T> {
  value: T;
  server?: StoreServer;
  link?: LinkCost;
}

/**
 * What `decide` and `alongside` know of the hosts: the measured link, the hosts on this machine, a meeting point of
 * them all.
 */
export interface HostsAtStart {
  link?: LinkCost;
  hostsOnMachine: number;
  /** Returns once every host has called it with `name` (HostChannel.meet; `hint`: what may keep a host away). */
  meet(name: string, hint?: string): Promise<void>;
}

/**
 * `decide` runs on host 0; every host resolves with its value; host 0 also with the store it serves (the run's to
 * close).
 */
/**
 * `alongside`: what the other hosts do while host 0 decides, before they wait for its choice (auto: the same
 * profiling, discarded, so that hosts sharing a machine's cores load it while host 0 measures as they will in the run).
 */
export async function decideOnHost0<T extends object>(
  cfg: ResolvedConfig,
  decide: (hosts: HostsAtStart) => Promise<T>,
  measureLink = false,
  alongside?: (hosts: HostsAtStart) => Promise<unknown>,
): Promise<Decided<T>> {
  const rendezvous = cfg.rendezvous!;
  const server = cfg.topology.process === 0 ? await serveRendezvous(rendezvous) : undefined;
  let channel: HostChannel | undefined;
  try {
    const address = await addressTowards(rendezvous, Math.max(cfg.stallTimeoutMs, REACH_MS));
    channel = await HostChannel.open(
      storeUrl(rendezvous),
      cfg.topology,
      DECISION_WAIT_MS,
      peerWaitMs(cfg.stallTimeoutMs),
      address,
    );
    await channel.agreeOnFlags(hostFlags(cfg, true));
    const hostsOnMachine = await channel.hostsSharingMachine(machineId());
    const link = measureLink ? await probeHostLink(cfg, address) : undefined;
    const open = channel;
    const hosts: HostsAtStart = { link, hostsOnMachine, meet: (name, hint) => open.meet(name, hint) };
    if (cfg.topology.process !== 0 && alongside) await alongside(hosts);
    return { value: await channel.shareChoice(() => decide(hosts)), server, link };
  } catch (err) {
    await server?.close();
    throw err;
  } finally {
    channel?.close();
  }
}
