/**
 * The registry of transports. Shared memory is built in (and gloo, hierarchical
 * and shm when their addons are built); others register
 * from their own file (a plugin module loaded in every thread of the run, see
 * `plugins` in the config).
 */
import { TandemError } from '../errors.js';
import { NamedRegistry } from '../named-registry.js';
import type { Collective, CollectiveEnv } from './collective.js';
import type { RankHandle, Transport } from './transport.js';
import { SHARED_MEMORY_TRANSPORT } from './shared-memory-transport.js';
import { GLOO_TRANSPORT } from './gloo-transport.js';
import { HIERARCHICAL_TRANSPORT } from './hierarchical-transport.js';
import { GLOO_HOW_TO, loadGlooAddon } from './gloo/gloo-addon.js';
import { PROCESS_SHM_TRANSPORT } from './process-shm-transport.js';
import { SHM_HOW_TO, loadShmAddon } from './shm/shm-addon.js';
import { REBUILD_COMMAND } from '../addon-load.js';

/**
 * Gloo and the hierarchical transport (shared memory + Gloo) are built in when the Gloo addon loaded (built at install
 * when libgloo-dev is there).
 */
const gloo = loadGlooAddon();
const GLOO_BASED = [GLOO_TRANSPORT, HIERARCHICAL_TRANSPORT];

/**
 * The shm transport (processes of one machine through POSIX shared memory) is built in when the shm addon loaded (built
 * at install on Linux).
 */
const shm = loadShmAddon();

const transports = new NamedRegistry<Transport>(
  'transport',
  [SHARED_MEMORY_TRANSPORT, ...(gloo.loaded ? GLOO_BASED : []), ...(shm.loaded ? [PROCESS_SHM_TRANSPORT] : [])],
  (name, known) => {
    if (GLOO_BASED.some(t => t.name === name) && !gloo.loaded) {
      return new TandemError(
        'BAD_CONFIG',
        `transport '${name}' is not available: ${gloo.reason}. To get it, ${GLOO_HOW_TO} ` +
          `(apt-get install libgloo-dev && ${REBUILD_COMMAND})`,
      );
    }
    if (name === PROCESS_SHM_TRANSPORT.name && !shm.loaded) {
      return new TandemError(
        'BAD_CONFIG',
        `transport '${name}' is not available: ${shm.reason}. To get it, ${SHM_HOW_TO}; or use --transport gloo`,
      );
    }
    return new TandemError(
      'BAD_CONFIG',
      `transport '${name}' is not registered (registered: ${known.join(', ')}); ` +
        'a plugin module that registers it must be listed in `plugins`',
    );
  },
);

export const DEFAULT_TRANSPORT = SHARED_MEMORY_TRANSPORT.name;

export function registerTransport(transport: Transport): void {
  transports.register(transport);
}
export function transportNames(): string[] {
  return transports.names();
}
export function getTransport(name: string): Transport {
  return transports.get(name);
}

/** Opens this rank's end of a prepared communicator, on the rank's thread. */
export function openCollective(handle: RankHandle, env: CollectiveEnv): Collective {
  return getTransport(handle.transport).open(handle, env);
}
