import { Observable, type OperatorFunction } from '#rxjs';
import type { ParameterGroup } from '../../model/parameter-layout.js';
import type { GradientReady, GroupReady } from '../events.js';

/**
 * Emits a `GroupReady` the moment the last gradient of an exchange group has
 * arrived, per step. State (floats still missing per group, ranges seen)
 * lives in the subscription's closure and resets at each new step.
 *
 * @example
 * gradientReady$.pipe(completeGroups(groups), handOff(control, device)).subscribe();
 */
export function completeGroups(groups: readonly ParameterGroup[]): OperatorFunction<GradientReady, GroupReady> {
  return source =>
    new Observable<GroupReady>(subscriber => {
      let step = -1;
      let missing: number[] = [];
      /**
       * Starts of the ranges already received this step: a range arriving twice is an error even before its group
       * completes.
       */
      let seen = new Set<number>();
      return source.subscribe({
        next(g) {
          if (g.step !== step) {
            step = g.step;
            missing = groups.map(gr => gr.end - gr.start);
            seen = new Set();
          }
          if (seen.has(g.start)) {
            const i = groups.findIndex(gr => g.start >= gr.start && g.start < gr.end);
            subscriber.error(new Error(`group ${groups[i]?.name ?? '?'} received a gradient twice in step ${step}`));
            return;
          }
          seen.add(g.start);
          for (let i = 0; i < groups.length; i++) {
            const lo = Math.max(g.start, groups[i].start),
              hi = Math.min(g.end, groups[i].end);
            if (hi <= lo) continue;
            missing[i] -= hi - lo;
            if (missing[i] === 0) subscriber.next({ step, group: i, at: g.at });
            else if (missing[i] < 0)
              subscriber.error(new Error(`group ${groups[i].name} received a gradient twice in step ${step}`));
          }
        },
        error: e => subscriber.error(e),
        complete: () => subscriber.complete(),
      });
    });
}
