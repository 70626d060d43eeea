import { concatMap, type OperatorFunction } from '#rxjs';
import type { Collective } from '../../collectives/collective.js';
import type { ParameterGroup } from '../../model/parameter-layout.js';
import { wallNow } from '../../monitor/span.js';
import type { GroupExchange } from '../events.js';

/** A collective whose ranks read each other's slots in place: it reduces one shard per rank (collective.ts). */
export type ShardingCollective = Collective & Required<Pick<Collective, 'reduceScatterMean'>>;

/**
 * Averages this device's shard of a group's gradients over the devices (reduce-scatter mean into this device's
 * gradient slot), one group at a time in arrival order; the unit carries the shard on to applyShardUpdate, which
 * updates it for every replica. The rest of the group's gradient in this slot is left unreduced.
 *
 * @example
 * of(unit).pipe(reduceScatterGroup(collective, grads, groups), applyShardUpdate(…), publishApplied(…));
 */
export function reduceScatterGroup(
  collective: ShardingCollective,
  grads: Float32Array,
  groups: readonly ParameterGroup[],
): OperatorFunction<GroupExchange, GroupExchange> {
  return concatMap(async unit => {
    const { start, end } = groups[unit.group];
    const exchangeStart = wallNow();
    const shard = await collective.reduceScatterMean(grads, start, end);
    return { ...unit, shard, exchangeStart, exchangeEnd: wallNow() };
  });
}
