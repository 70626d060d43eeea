import { concatMap, type OperatorFunction } from '#rxjs';
import type { Collective } from '../../collectives/collective.js';
import type { ParameterGroup } from '../../model/parameter-layout.js';
import { wallNow } from '../../monitor/span.js';
import type { GroupExchange } from '../events.js';

/**
 * Exchanges and averages a group's gradients with the peers (all-reduce mean
 * of this rank's gradient buffer over the group's range, or over the unit's
 * chunk of it), one unit at a time, in arrival order.
 *
 * @example
 * of(unit).pipe(allReduceGroup(collective, grads, groups), applyGroupUpdate(…), publishApplied(…));
 */
export function allReduceGroup(
  collective: Collective,
  grads: Float32Array,
  groups: readonly ParameterGroup[],
): OperatorFunction<GroupExchange, GroupExchange> {
  return concatMap(async unit => {
    const { start, end } = unit.chunk ?? groups[unit.group];
    const exchangeStart = wallNow();
    await collective.allReduce(grads, start, end, 'mean');
    return { ...unit, exchangeStart, exchangeEnd: wallNow() };
  });
}
