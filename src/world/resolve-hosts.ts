/**
 * The hosts of a run, checked before any thread starts: `hosts` processes
 * (default 1: the job is this process, exactly as before), this one being
 * `hostRank`, meeting at `rendezvous`. What does not work across hosts yet is
 * refused here, naming the option.
 */
import { TandemError } from '../errors.js';
import type { TrainConfig } from '../config-types.js';
import { multiProcess, singleProcess, type Topology } from './topology.js';
import { parseRendezvous, type Rendezvous } from './rendezvous.js';
import { GPU_ENV } from './gpu-pinning.js';
import { readJobSecret } from './secret-file.js';

export interface ResolvedHosts {
  topology: Topology;
  rendezvous?: Rendezvous;
}

/**
 * The transports that span processes: flat Gloo, shared memory inside a host with Gloo between hosts, POSIX shared
 * memory on one machine.
 */
export const HOSTS_TRANSPORTS = ['hierarchical', 'gloo', 'shm'] as const;

/**
 * The default across hosts: `shm` when every process is on this machine (the rendezvous is a loopback address, which
 * only this machine's processes reach) and the shm transport is built (`available`); otherwise hierarchical with
 * several devices per host, and with one the flat gloo it would equal.
 */
export function hostsTransport(
  localDevices: number,
  rendezvous: Rendezvous,
  available: (name: string) => boolean,
): string {
  if (isLoopback(rendezvous.host) && available('shm')) return 'shm';
  return localDevices > 1 ? 'hierarchical' : 'gloo';
}

/** 127.0.0.0/8, ::1 and localhost: an address only this machine's processes reach. */
export function isLoopback(host: string): boolean {
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) || host === '::1' || host.toLowerCase() === 'localhost';
}

/**
 * Whether this process is one `tandem launch --gpus` started (its environment has TANDEM_GPU_INDEX, gpu-pinning.ts).
 */
export function gpuProcess(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[GPU_ENV.index] !== undefined;
}

function bad(field: string, message: string): never {
  throw new TandemError('BAD_CONFIG', `config.${field}: ${message}`);
}

/**
 * `env`: a process `tandem launch --gpus` started has TANDEM_GPU_INDEX (gpu-pinning.ts) and is named `GPU process k`
 * in messages, as the launcher names it.
 */
export function resolveHosts(
  config: TrainConfig,
  localDevices: number,
  env: NodeJS.ProcessEnv = process.env,
): ResolvedHosts {
  const hosts = config.hosts ?? 1;
  if (!Number.isInteger(hosts) || hosts < 1 || hosts > 1024)
    bad('hosts', `must be an integer in [1, 1024], got ${JSON.stringify(hosts)}`);
  const hostRank = config.hostRank ?? 0;
  if (!Number.isInteger(hostRank) || hostRank < 0 || hostRank >= hosts)
    bad('hostRank', `must be an integer in [0, ${hosts}) for ${hosts} host(s), got ${JSON.stringify(hostRank)}`);
  if (hosts === 1) {
    if (config.rendezvous !== undefined) bad('rendezvous', 'is for several hosts (hosts > 1)');
    return { topology: singleProcess(localDevices) };
  }
  if (typeof config.rendezvous !== 'string')
    bad(
      'rendezvous',
      `${hosts} hosts need host 0's address and a free port to meet at, e.g. --rendezvous 10.0.0.1:29500 (or ` +
        `TANDEM_RENDEZVOUS)`,
    );
  refuseAcrossHosts(config, localDevices);
  readJobSecret(config, env);
  return {
    topology: multiProcess(hosts, hostRank, localDevices, gpuProcess(env) ? 'gpu' : undefined),
    rendezvous: parseRendezvous('rendezvous', config.rendezvous),
  };
}

/**
 * The methods that run across hosts: their label partitions and compute collectives span the world's global ranks
 * (fit-outputs: data-parallel with fit's loss of several outputs; test/fit-hosts.test.ts).
 */
const ACROSS_HOSTS_METHODS = new Set(['data-parallel', 'local-head', 'partial-fc', 'fit-outputs']);

/** What is not done across hosts yet (issue 15): refused before any thread starts. */
function refuseAcrossHosts(config: TrainConfig, localDevices: number): void {
  const not = (field: string, what: string) =>
    bad(
      field,
      `${what} does not work across hosts yet (hosts > 1 supports data-parallel, local-head and partial-fc ` +
        `over the ${HOSTS_TRANSPORTS.join(' or ')} transport; host 0 writes the outputs and checkpoints)`,
    );
  const method = config.method ?? 'data-parallel';
  if (!ACROSS_HOSTS_METHODS.has(method)) not('method', `method '${method}'`);
  if (config.transport !== undefined && !(HOSTS_TRANSPORTS as readonly string[]).includes(config.transport))
    not('transport', `transport '${config.transport}'`);
  if (config.exportDevice !== undefined && config.exportDevice >= localDevices) {
    bad(
      'exportDevice',
      `${config.exportDevice} is not on host 0 (its devices are global ranks 0..${localDevices - 1}); host 0 ` +
        `exports the model`,
    );
  }
}
