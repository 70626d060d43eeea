/**
 * The state before the update in flight, so that an aborted run can still
 * checkpoint the last step every group completed. With overlapped strategies
 * an abort mid-step (a device hangs) can leave some groups of a replica at
 * step s and the others at s-1. Device 0's comm thread therefore copies each
 * group's parameters and optimizer state here just before applying that
 * group's update (with a marker word per group: invalid during the copy, then
 * the step whose update follows). The last group of a step needs no copy:
 * once it is applied, the step is complete. After every thread has ended,
 * `rebuild` picks, group by group, the live values or the copy to assemble the
 * newest step that every group can give. Allocated only when the run
 * checkpoints (and only read by an abort).
 */
import type { ParameterGroup } from '../model/parameter-layout.js';
import { allocateShared } from './shared-buffers.js';

const NONE = -1;

export class StepPreimage {
  private readonly marks: Int32Array;
  private readonly params: Float32Array;
  private readonly state: Float32Array[];

  /**
   * A buffer for `groupCount` groups of a layout of `total` floats with `stateSlots` optimizer vectors; every mark
   * NONE.
   */
  static allocate(groupCount: number, total: number, stateSlots: number): SharedArrayBuffer {
    const buffer = allocateShared(
      StepPreimage.byteLength(groupCount, total, stateSlots),
      'the pre-update copy for checkpoints',
    );
    new Int32Array(buffer, 0, groupCount).fill(NONE);
    return buffer;
  }

  private static byteLength(groupCount: number, total: number, stateSlots: number): number {
    return 4 * (groupCount + total * (1 + stateSlots));
  }

  constructor(buffer: SharedArrayBuffer, groupCount: number, total: number, stateSlots: number) {
    this.marks = new Int32Array(buffer, 0, groupCount);
    this.params = new Float32Array(buffer, 4 * groupCount, total);
    this.state = Array.from(
      { length: stateSlots },
      (_, j) => new Float32Array(buffer, 4 * (groupCount + total * (1 + j)), total),
    );
  }

  /**
   * Comm thread, before applying `step`'s update of `group` ([start, end)) of `groupCount`: keep the values it will
   * overwrite.
   * `everyGroup`: copy the last group too (priority exchange: any group may be the one that completes the step).
   */
  save(
    group: number,
    groupCount: number,
    { start, end }: ParameterGroup,
    step: number,
    params: Float32Array,
    state: Float32Array[],
    everyGroup = false,
  ): void {
    if (group === groupCount - 1 && !everyGroup) return; // the update that completes the step
    Atomics.store(this.marks, group, NONE); // a copy cut short is never used
    this.params.set(params.subarray(start, end), start);
    this.state.forEach((s, j) => s.set(state[j].subarray(start, end), start));
    Atomics.store(this.marks, group, step);
  }

  /**
   * Main thread, every thread of the run ended: the newest step k such that every group holds step k either live
   * (`applied(g)` = k, no update of it in flight) or in the copy (made before the update of k+1). Undefined when none.
   * `updating`: the step whose update device 0's comm thread was in when it ended, if it was in one. `target`: that
   * step instead of the newest (undefined when the live values and the copy cannot give it).
   */
  rebuild(
    groups: readonly ParameterGroup[],
    applied: (group: number) => number,
    updating: number | undefined,
    params: Float32Array,
    state: Float32Array[],
    target?: number,
  ): { step: number; params: Float32Array; optimizerState: Float32Array[] } | undefined {
    const last = groups.length - 1;
    const sources = groups.map((_, g) => {
      const live = applied(g);
      if (g === last && Atomics.load(this.marks, g) === NONE) {
        // no copy: intact unless its own update was in flight (every earlier group of that step applied)
        const inFlight = updating === live + 1 && groups.every((_, h) => h === last || applied(h) >= live + 1);
        return { live: inFlight ? undefined : live, copy: undefined };
      }
      const mark = Atomics.load(this.marks, g);
      const liveIntact = mark !== live + 1; // mark = live + 1: the update of step live + 1 may be half written
      return { live: liveIntact ? live : undefined, copy: mark === NONE ? undefined : mark - 1 };
    });
    const candidates = sources.flatMap(s => [s.live, s.copy]).filter((k): k is number => k !== undefined && k >= 0);
    const whole = candidates.filter(k => sources.every(s => s.live === k || s.copy === k)).sort((a, b) => b - a);
    const step = target === undefined ? whole[0] : whole.find(k => k === target);
    if (step === undefined) return undefined;
    const out = { step, params: params.slice(), optimizerState: state.map(s => s.slice()) };
    groups.forEach(({ start, end }, g) => {
      if (sources[g].live === step) return;
      out.params.set(this.params.subarray(start, end), start);
      out.optimizerState.forEach((s, j) => s.set(this.state[j].subarray(start, end), start));
    });
    return out;
  }
}
