/** The schedule's fields and the transport, from the config alone. */
import { availableParallelism } from 'node:os';
import { bad, oneOf } from '../config-checks.js';
import type { ResolvedConfig, TrainConfig } from '../config-types.js';
import { STRATEGIES, type StrategyOptions } from '../pipeline/strategy.js';
import { parseLink, type LinkModel } from '../pipeline/link-model.js';
import { DEFAULT_CHUNK_FLOATS, type ExchangeOrder } from '../pipeline/priority-schedule.js';
import { DEFAULT_TRANSPORT, getTransport, transportNames } from '../collectives/transport-registry.js';
import { hostsTransport } from '../world/resolve-hosts.js';

/**
 * The strategy when none is named: `per-layer` for a world of one device that has two or more CPUs to run on (nothing
 * to exchange: each layer's update then runs on the comm thread while backward goes on below it, where `sequential`
 * makes the next forward wait for the whole update; alexnet-mini on one device, bf16: 12.9 -> 11.6 ms a step),
 * `sequential` otherwise (one exchange of everything, the fewest collectives). On one CPU (`cpus`: the process's
 * affinity, as taskset or a container's cpuset limit it) there is no second core to overlap the update with, and
 * per-layer's wake-ups of the comm thread only cost: one core, bf16, one device, three alternated pairs of 500-600
 * steps, 2026-12-06, ms a step: alexnet-mini 14.5-15.4 -> 13.9-14.1, resnet-mini 22.6-23.9 -> 21.4-22.0,
 * mnist-node 15.3-16.0 -> 14.6-15.3, the same replica checksums. An elastic run (minHosts) may grow: `sequential`
 * from the start.
 */
function defaultStrategy(devices: number, elastic: boolean, cpus: number): 'per-layer' | 'sequential' {
  return devices === 1 && !elastic && cpus > 1 ? 'per-layer' : 'sequential';
}

/** `cpus`: the CPUs this process may run on (its affinity), which picks the default strategy of one device. */
export function scheduleFields(
  config: TrainConfig,
  devices: number,
  cpus: number = availableParallelism(),
): Pick<ResolvedConfig, 'strategy' | 'strategyOptions' | 'exchange' | 'link'> {
  const strategyOptions: StrategyOptions = {
    splitLayer: config.splitLayer,
    bucketCapMB: config.bucketCapMB ?? 0.5,
    firstBucketMB: config.firstBucketMB ?? 0.125,
  };
  const exchange: ExchangeOrder =
    (config.exchangeOrder ?? 'ready') === 'priority'
      ? { order: 'priority', chunkFloats: config.chunkFloats ?? DEFAULT_CHUNK_FLOATS }
      : { order: 'ready' };
  if (exchange.order === 'ready' && config.chunkFloats !== undefined)
    bad('chunkFloats', "applies to exchangeOrder 'priority' only (--exchange-order priority)");
  let link: LinkModel | undefined;
  if (config.link !== undefined && config.link !== 'none') {
    if (typeof config.link !== 'string') bad('link', 'must be a string like 1gbps');
    link = parseLink(config.link);
  }
  const strategy = strategyOf(config.strategy ?? defaultStrategy(devices, config.minHosts !== undefined, cpus));
  return { strategy, strategyOptions, exchange, link };
}

/** A built-in strategy's name, `auto`, or a custom strategy's (its groups are computed on the main thread). */
function strategyOf(spec: NonNullable<TrainConfig['strategy']>): string {
  if (typeof spec === 'object' && spec !== null) {
    if (typeof spec.name !== 'string' || typeof spec.groups !== 'function')
      bad('strategy', 'a custom strategy needs a name and a groups(layout) function');
    return spec.name;
  }
  return oneOf('strategy', spec, [...STRATEGIES, 'auto'] as const);
}

/** The transport named, else the default (several hosts: by the rendezvous and the devices per host). */
export function transportOf(
  config: TrainConfig,
  topology: ResolvedConfig['topology'],
  rendezvous: ResolvedConfig['rendezvous'],
): string {
  const name =
    config.transport ??
    (topology.processes > 1 && rendezvous
      ? hostsTransport(topology.localDevices, rendezvous, n => transportNames().includes(n))
      : DEFAULT_TRANSPORT);
  return getTransport(name).name;
}
