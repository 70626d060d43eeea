/** The schedule's fields and the transport, from the config alone. */
import { bad, oneOf } from '../config-checks.js';
import type { ResolvedConfig, TrainConfig } from '../config-types.js';
import { STRATEGIES, type StrategyOptions } from '../pipeline/strategy.js';
import { parseLink, type LinkModel } from '../pipeline/link-model.js';
import { DEFAULT_CHUNK_FLOATS, type ExchangeOrder } from '../pipeline/priority-schedule.js';
import { DEFAULT_TRANSPORT, getTransport, transportNames } from '../collectives/transport-registry.js';
import { hostsTransport } from '../world/resolve-hosts.js';

/**
 * The strategy when none is named: `per-layer` for a world of one device (nothing to exchange: each layer's update
 * then runs on the comm thread while backward goes on below it, where `sequential` makes the next forward wait for
 * the whole update; alexnet-mini on one device, bf16: 12.9 -> 11.6 ms a step), `sequential` otherwise (one exchange
 * of everything, the fewest collectives). An elastic run (minHosts) may grow: `sequential` from the start.
 */
function defaultStrategy(devices: number, elastic: boolean): 'per-layer' | 'sequential' {
  return devices === 1 && !elastic ? 'per-layer' : 'sequential';
}

export function scheduleFields(
  config: TrainConfig,
  devices: number,
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
  const strategy = strategyOf(config.strategy ?? defaultStrategy(devices, config.minHosts !== undefined));
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
