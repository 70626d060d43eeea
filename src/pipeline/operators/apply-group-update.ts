import { map, type MonoTypeOperatorFunction } from '#rxjs';
import type { ParameterGroup } from '../../model/parameter-layout.js';
import type { OptimizerConfig } from '../../optim/flat-optimizer.js';
import { JS_ARITHMETIC, type FlatArithmetic } from '../../optim/flat-arithmetic.js';
import { wallNow } from '../../monitor/span.js';
import type { GroupExchange } from '../events.js';

/**
 * Applies the optimizer update of one averaged group to this device's
 * parameters (shared memory), on the comm thread. With `skipNonFinite`, a
 * group whose averaged gradient holds a NaN or infinity is not applied (the
 * average is the same bits on every device, so every device skips it).
 * `arithmetic` runs the update (the JS loop, or the native addon's: the same bits).
 *
 * @example
 * of(unit).pipe(allReduceGroup(…), applyGroupUpdate(optimizer, params, grads, state, groups), publishApplied(…));
 */
export function applyGroupUpdate(
  optimizer: OptimizerConfig,
  params: Float32Array,
  grads: Float32Array,
  state: Float32Array[],
  groups: readonly ParameterGroup[],
  skipNonFinite = false,
  arithmetic: FlatArithmetic = JS_ARITHMETIC,
): MonoTypeOperatorFunction<GroupExchange> {
  return map(unit => {
    const { start, end } = groups[unit.group];
    const applyStart = wallNow();
    if (skipNonFinite && !allFinite(grads, start, end))
      return { ...unit, applyStart, applyEnd: wallNow(), skipped: true };
    arithmetic.applyUpdate(optimizer, params, grads, state, start, end, unit.step);
    return { ...unit, applyStart, applyEnd: wallNow() };
  });
}

function allFinite(values: Float32Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (!Number.isFinite(values[i])) return false;
  return true;
}
