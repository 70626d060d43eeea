import { concatMap, type OperatorFunction } from 'rxjs';
import type { Collective } from '../../collectives/collective.js';
import type { ParameterGroup, ParameterSpec } from '../../model/parameter-layout.js';
import { wallNow } from '../../monitor/span.js';
import type { BucketInfo, CommHook, CommHookOptions } from '../comm-hook.js';
import type { GroupExchange } from '../events.js';

/**
 * Exchanges a group through a communication hook instead of the all-reduce:
 * the hook gets the group's range of this rank's gradient buffer, its
 * variables, and the group's persistent state (made on the group's first
 * exchange, kept in the closure), and leaves the mean over ranks in the range.
 *
 * @example
 * of(unit).pipe(commHookGroup(getCommHook('fp16'), options, collective, grads, groups, layout.variables, seed), applyGroupUpdate(…));
 */
export function commHookGroup(hook: CommHook, options: CommHookOptions, collective: Collective, grads: Float32Array,
  groups: readonly ParameterGroup[], variables: readonly ParameterSpec[], seed: number): OperatorFunction<GroupExchange, GroupExchange> {
  const states = new Map<number, { info: BucketInfo; state: unknown }>();
  const stateOf = (group: number) => {
    let s = states.get(group);
    if (!s) {
      const info = bucketInfo(groups, group, variables, collective, seed);
      s = { info, state: hook.init(info, options) };
      states.set(group, s);
    }
    return s;
  };
  return concatMap(async unit => {
    const { start, end } = groups[unit.group];
    const exchangeStart = wallNow();
    const { info, state } = stateOf(unit.group);
    await hook.exchange({ ...info, buffer: grads.subarray(start, end), step: unit.step }, state, collective);
    return { ...unit, exchangeStart, exchangeEnd: wallNow() };
  });
}

function bucketInfo(groups: readonly ParameterGroup[], group: number, variables: readonly ParameterSpec[], collective: Collective, seed: number): BucketInfo {
  const { name, start, end } = groups[group];
  return {
    group, groupName: name, length: end - start, rank: collective.rank, size: collective.size, seed,
    variables: variables.filter(v => v.offset >= start && v.offset + v.size <= end)
      .map(v => ({ name: v.name, shape: [...v.shape], offset: v.offset - start, size: v.size })),
  };
}
