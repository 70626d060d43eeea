/**
 * Several hosts: joining the world (host 0's store, the address this host's ranks listen on, this host's line to the
 * others), and the communicators of this process's devices on the run's transport.
 */
import type { ResolvedConfig } from '../config-types.js';
import { registeredSlots, type SharedBuffers } from '../actors/shared-buffers.js';
import { getTransport } from '../collectives/transport-registry.js';
import type { PreparedCommunicator } from '../collectives/transport.js';
import type { StoreServer } from '../collectives/gloo/tcp-store-server.js';
import { globalRank } from '../world/topology.js';
import { addressTowards, serveRendezvous, storeUrl } from '../world/rendezvous.js';
import { HostChannel } from '../world/host-channel.js';
import { peerWaitMs } from '../world/peer-wait.js';

/**
 * Several hosts: host 0's store (on host 0, when this run opened it), the address this host's ranks listen on, this
 * host's line to the others.
 */
export interface JoinedWorld {
  server?: StoreServer;
  hostname: string;
  channel?: HostChannel;
}

/**
 * Host 0 serves the store at the rendezvous (or takes over `served`, the store train() opened to agree on an auto
 * strategy); every host finds the address it reaches it from and opens its line to the others. `joined` receives the
 * world as soon as it exists, so that the run closes what was opened even when a later part of joining fails.
 */
export async function joinWorld(
  cfg: Pick<ResolvedConfig, 'rendezvous' | 'topology' | 'stallTimeoutMs'>,
  watchdogMs: number,
  joined: (world: JoinedWorld) => void,
  served?: StoreServer,
): Promise<JoinedWorld | undefined> {
  const { rendezvous, topology } = cfg;
  if (!rendezvous) return undefined;
  // A store served by the caller (auto's, an elastic run's across generations) is the caller's to close.
  const server = topology.process === 0 && !served ? await serveRendezvous(rendezvous) : undefined;
  const world: JoinedWorld = { server, hostname: '' };
  joined(world);
  world.hostname = await addressTowards(rendezvous, watchdogMs);
  world.channel = await HostChannel.open(
    storeUrl(rendezvous),
    topology,
    watchdogMs,
    peerWaitMs(cfg.stallTimeoutMs),
    world.hostname,
    rendezvous.prefix,
  );
  return world;
}

/**
 * A communicator of this process's devices on the run's transport (several hosts: of every host's devices, by global
 * rank).
 */
export async function communicator(
  cfg: Pick<ResolvedConfig, 'topology' | 'transport' | 'allReduce' | 'rendezvous' | 'devices' | 'pluginOptions'>,
  world: JoinedWorld | undefined,
  name: string,
  buffers: SharedBuffers | undefined,
  stagingFloats: number,
): Promise<PreparedCommunicator> {
  const { topology } = cfg;
  return getTransport(cfg.transport).prepare({
    name,
    size: topology.localDevices,
    registered: buffers ? registeredSlots(buffers) : [],
    stagingFloats,
    options: { allReduce: cfg.allReduce, pluginOptions: cfg.pluginOptions },
    world: world &&
      cfg.rendezvous && {
        store: storeUrl(cfg.rendezvous),
        rankOffset: globalRank(topology, 0),
        worldSize: cfg.devices,
        hostname: world.hostname,
        ranksPerProcess: topology.localDevices,
        processKind: topology.processKind,
        key: `${cfg.rendezvous.prefix ?? ''}tandem.${name}`,
      },
  });
}
