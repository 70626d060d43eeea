import { concatMap, type OperatorFunction } from 'rxjs';
import type { Collective, SlotSet } from '../../collectives/collective.js';
import type { ParameterGroup } from '../../model/parameter-layout.js';
import { wallNow } from '../../monitor/span.js';
import type { GroupExchange } from '../events.js';

/**
 * Exchanges and averages a group's gradients with the peers (all-reduce mean
 * over the group's range), one group at a time, in arrival order.
 *
 * @example
 * of(unit).pipe(allReduceGroup(collective, grads, groups), applyGroupUpdate(…), publishApplied(…));
 */
export function allReduceGroup(collective: Collective, slots: SlotSet, groups: readonly ParameterGroup[]): OperatorFunction<GroupExchange, GroupExchange> {
  return concatMap(async unit => {
    const { start, end } = groups[unit.group];
    const exchangeStart = wallNow();
    await collective.allReduceMean(slots, start, end);
    return { ...unit, exchangeStart, exchangeEnd: wallNow() };
  });
}
