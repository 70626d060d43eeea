import { map, type MonoTypeOperatorFunction } from '#rxjs';
import type { ParameterGroup } from '../../model/parameter-layout.js';
import { allReduceWireMs, holdUntil, type LinkModel } from '../link-model.js';
import { wallNow } from '../../monitor/span.js';
import type { GroupExchange } from '../events.js';

/**
 * EMULATION: holds the comm side until the exchange has taken as long as a
 * ring all-reduce of the group (or of the unit's chunk: each chunk pays its
 * bytes and the latency) would on `link` (bytes/bandwidth + latency, counted
 * from the start of the exchange).
 *
 * @example
 * of(unit).pipe(allReduceGroup(…), emulateLink(parseLink('1gbps'), devices, groups), applyGroupUpdate(…));
 */
export function emulateLink(
  link: LinkModel,
  devices: number,
  groups: readonly ParameterGroup[],
): MonoTypeOperatorFunction<GroupExchange> {
  return map(unit => {
    const { start, end } = unit.chunk ?? groups[unit.group];
    const ms = allReduceWireMs(link, (end - start) * 4, devices);
    // wallNow() is performance.timeOrigin + performance.now(): the start on the hold's clock, with no second
    // reading between (a thread preempted between two readings used to shorten the hold by that much).
    const began = unit.exchangeStart ?? wallNow();
    holdUntil(began - performance.timeOrigin, ms);
    return { ...unit, exchangeEnd: wallNow() };
  });
}
