import { concatMap, type OperatorFunction } from '#rxjs';
import type { Collective } from '../../collectives/collective.js';
import type { ParameterGroup } from '../../model/parameter-layout.js';
import { wallNow } from '../../monitor/span.js';
import type { HookStates } from '../hook-states.js';
import type { GroupExchange } from '../events.js';

/**
 * Exchanges a group through a communication hook instead of the all-reduce:
 * the hook gets the group's range of this rank's gradient buffer, its
 * variables, and the group's persistent state (`states`: made for every group
 * before the first exchange, restored from a checkpoint if any), and leaves
 * the mean over ranks in the range; then the state's shared copy (for
 * checkpoints) is refreshed.
 *
 * @example
 * of(unit).pipe(commHookGroup(new HookStates(getCommHook('fp16'), options, groups, layout.variables, rank, size, seed),
 * collective, grads, groups), applyGroupUpdate(…));
 */
export function commHookGroup(
  states: HookStates,
  collective: Collective,
  grads: Float32Array,
  groups: readonly ParameterGroup[],
): OperatorFunction<GroupExchange, GroupExchange> {
  return concatMap(async unit => {
    const { start, end } = groups[unit.group];
    const exchangeStart = wallNow();
    const { info, state } = states.groups[unit.group];
    await states.hook.exchange({ ...info, buffer: grads.subarray(start, end), step: unit.step }, state, collective);
    states.publish(unit.group);
    return { ...unit, exchangeStart, exchangeEnd: wallNow() };
  });
}
