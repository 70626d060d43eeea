/**
 * `--min-hosts M`, checked before any thread starts: an elastic run needs several hosts, at most `hosts` of them, a
 * state that lives whole in every replica (data-parallel without a communication hook), a transport whose
 * communicators can be formed again between the hosts that remain, and a global batch that splits evenly over every
 * number of devices that may remain.
 */
import { TandemError } from '../errors.js';
import type { ResolvedConfig, TrainConfig } from '../config-types.js';

export interface Elastic {
  minHosts: number;
}

/** The transports an elastic run re-forms (a new Gloo context per generation; shared memory inside a host kept). */
const ELASTIC_TRANSPORTS = ['gloo', 'hierarchical'];

function bad(message: string): never {
  throw new TandemError('BAD_CONFIG', `config.minHosts: ${message}`);
}

/** The run's elasticity (undefined: none, a lost host ends the run). BAD_CONFIG naming the reason otherwise. */
export function elasticOf(config: TrainConfig, cfg: ResolvedConfig): Elastic | undefined {
  const { minHosts } = config;
  if (minHosts === undefined) return undefined;
  const hosts = cfg.topology.processes;
  if (hosts === 1 || !cfg.rendezvous) bad('is for several hosts (--hosts N with N > 1)');
  if (minHosts > hosts) bad(`${minHosts} is more than the ${hosts} hosts of the run (--hosts)`);
  if (cfg.method !== 'data-parallel')
    bad(
      `method '${cfg.method}' owns labels per device (each device's head and data are its share of the classes, ` +
        `fixed by the device count): a lost host would take its labels with it; elastic runs are data-parallel only`,
    );
  if (cfg.commHook)
    bad(
      `communication hook '${cfg.commHook.name}' keeps state per rank, which a lost host takes with it; run ` +
        `without --comm-hook`,
    );
  if (!ELASTIC_TRANSPORTS.includes(cfg.transport))
    bad(
      `transport '${cfg.transport}' cannot be re-formed between the hosts that remain; give --transport ` +
        `${ELASTIC_TRANSPORTS.join(' or ')}`,
    );
  if (cfg.accumulate > 1) bad('--accumulate is not elastic yet (its micro-batches are cut per device)');
  const local = cfg.topology.localDevices;
  for (let k = minHosts; k <= hosts; k++) {
    if (cfg.batch % (k * local) !== 0)
      bad(
        `the global batch ${cfg.batch} does not split evenly over the ${k * local} devices of ${k} hosts; choose ` +
          `a --batch that every device count from ${minHosts * local} to ${hosts * local} divides`,
      );
  }
  return { minHosts };
}
