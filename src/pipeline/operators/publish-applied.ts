import { tap, type MonoTypeOperatorFunction } from '#rxjs';
import type { ControlBlock } from '../control-block.js';
import type { GroupExchange } from '../events.js';

/**
 * Publishes that a group's update is applied (Atomics store + notify): the
 * compute thread's next forward waits for every group of the step.
 *
 * @example
 * of(unit).pipe(allReduceGroup(…), applyGroupUpdate(…), publishApplied(control, device));
 */
export function publishApplied(control: ControlBlock, device: number): MonoTypeOperatorFunction<GroupExchange> {
  return tap(unit => control.markApplied(device, unit.group, unit.step));
}
