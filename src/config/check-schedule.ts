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
  const strategyOptions = strategyOptionsOf(config);
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
  refuseUnusedStrategyOptions(config, strategy);
  return { strategy, strategyOptions, exchange, link };
}

/**
 * A strategy's own options with another strategy would be ignored unsaid (`--split-layer 2` on `sequential` trains
 * sequential): each is refused, naming the strategy it applies to. auto picks its split from the profile.
 */
function refuseUnusedStrategyOptions(config: TrainConfig, strategy: string): void {
  const used = (field: keyof TrainConfig, strategies: readonly string[], flag: string): void => {
    if (config[field] === undefined || strategies.includes(strategy)) return;
    const named = strategies.map(s => `'${s}'`).join(' or ');
    const auto = strategy === 'auto' && field === 'splitLayer' ? ' (auto picks the split from the profile)' : '';
    const fix = `give --strategy ${strategies[0]}, or remove ${flag}`;
    bad(field, `applies to strategy ${named} only, not '${strategy}'${auto}: ${fix}`);
  };
  used('splitLayer', ['two-group'], '--split-layer');
  used('bucketCapMB', ['buckets', 'auto'], '--bucket-mb');
  used('firstBucketMB', ['buckets', 'auto'], '--first-bucket-mb');
  used('timeShare', ['auto'], '--time-share (tandem profile takes it too)');
  used('paramShare', ['auto'], '--param-share (tandem profile takes it too)');
}

/** A strategy's options as a schedule reads them, the defaults in place. */
export function strategyOptionsOf(config: TrainConfig): StrategyOptions {
  return {
    splitLayer: config.splitLayer,
    bucketCapMB: config.bucketCapMB ?? 0.5,
    firstBucketMB: config.firstBucketMB ?? 0.125,
  };
}

/** The config of a profile's sequential run: the strategies' own options are for the predictions, not for it. */
export function sequentialTrialConfig(config: TrainConfig): TrainConfig {
  const { splitLayer: _s, bucketCapMB: _b, firstBucketMB: _f, timeShare: _t, paramShare: _p, ...rest } = config;
  void [_s, _b, _f, _t, _p];
  return { ...rest, strategy: 'sequential' };
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
