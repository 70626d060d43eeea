/**
 * The registry of transports, in the manner of tfjs-core's `registerKernel`:
 * config objects by name, duplicates refused. Shared memory is built in;
 * others register from their own file (a plugin module loaded in every
 * thread of the run, see `plugins` in the config).
 */
import { TandemError } from '../errors.js';
import type { Collective, CollectiveEnv } from './collective.js';
import type { RankHandle, Transport } from './transport.js';
import { SHARED_MEMORY_TRANSPORT } from './shared-memory-transport.js';

const transports = new Map<string, Transport>([[SHARED_MEMORY_TRANSPORT.name, SHARED_MEMORY_TRANSPORT]]);

export const DEFAULT_TRANSPORT = SHARED_MEMORY_TRANSPORT.name;

export function registerTransport(transport: Transport): void {
  if (transports.has(transport.name)) {
    throw new TandemError('BAD_CONFIG', `a transport named '${transport.name}' is already registered; give yours another name`);
  }
  transports.set(transport.name, transport);
}

export function transportNames(): string[] {
  return [...transports.keys()];
}

export function findTransport(name: string): Transport | undefined {
  return transports.get(name);
}

export function getTransport(name: string): Transport {
  const t = transports.get(name);
  if (!t) {
    throw new TandemError('BAD_CONFIG', `transport '${name}' is not registered (registered: ${transportNames().join(', ')}); ` +
      'a plugin module that registers it must be listed in `plugins`');
  }
  return t;
}

/** Opens this rank's end of a prepared communicator, on the rank's thread. */
export function openCollective(handle: RankHandle, env: CollectiveEnv): Collective {
  return getTransport(handle.transport).open(handle, env);
}
