import { tap, type MonoTypeOperatorFunction } from '#rxjs';
import type { ParameterGroup } from '../../model/parameter-layout.js';
import type { GroupExchange } from '../events.js';

/**
 * After a group's update (and before it is published applied): the group's parameters cast to bf16 into the device's
 * copy, and the step that copy now holds. Precision bf16: the device's next passes read the copy in place of casting
 * the weights themselves (actors/params-mirror.ts). A skipped update still records the step: the parameters, and so
 * the copy, are the step's.
 *
 * @example
 * of(unit).pipe(applyGroupUpdate(…), mirrorParamsBf16(params, copy, groups, cast), publishApplied(control, device));
 */
export function mirrorParamsBf16(
  params: Float32Array,
  copy: { bits: Uint16Array; steps: Int32Array },
  groups: readonly ParameterGroup[],
  cast: (src: Float32Array, dst: Uint16Array) => void,
): MonoTypeOperatorFunction<GroupExchange> {
  return tap(unit => {
    const { start, end } = groups[unit.group];
    cast(params.subarray(start, end), copy.bits.subarray(start, end));
    Atomics.store(copy.steps, unit.group, unit.step);
  });
}
