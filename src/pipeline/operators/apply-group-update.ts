import { map, type MonoTypeOperatorFunction } from 'rxjs';
import type { ParameterGroup } from '../../model/parameter-layout.js';
import { applyUpdate, type OptimizerConfig } from '../../optim/flat-optimizer.js';
import { wallNow } from '../../monitor/span.js';
import type { GroupExchange } from '../events.js';

/**
 * Applies the optimizer update of one averaged group to this device's
 * parameters (shared memory), on the comm thread.
 *
 * @example
 * of(unit).pipe(allReduceGroup(…), applyGroupUpdate(optimizer, params, grads, state, groups), publishApplied(…));
 */
export function applyGroupUpdate(optimizer: OptimizerConfig, params: Float32Array, grads: Float32Array, state: Float32Array[],
  groups: readonly ParameterGroup[]): MonoTypeOperatorFunction<GroupExchange> {
  return map(unit => {
    const { start, end } = groups[unit.group];
    const applyStart = wallNow();
    applyUpdate(optimizer, params, grads, state, start, end, unit.step);
    return { ...unit, applyStart, applyEnd: wallNow() };
  });
}
