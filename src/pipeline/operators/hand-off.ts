import { tap, type MonoTypeOperatorFunction } from '#rxjs';
import type { ControlBlock } from '../control-block.js';
import type { GroupReady } from '../events.js';

/**
 * Hands a ready group to this device's comm thread (Atomics store + notify).
 * The compute side never waits here: it goes straight on with backward.
 *
 * @example
 * gradientReady$.pipe(completeGroups(groups), handOff(control, device)).subscribe();
 */
export function handOff(control: ControlBlock, device: number): MonoTypeOperatorFunction<GroupReady> {
  return tap(g => control.markGradsReady(device, g.group, g.step));
}
