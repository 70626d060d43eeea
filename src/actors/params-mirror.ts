/**
 * The bf16 copy of a device's parameters that its comm thread keeps (pipeline/operators/mirror-params-bf16.ts), as the
 * device's passes of step `s` may read it: a range is held when every group it touches holds step s − 1, the update
 * the forward waited for. Step 1 after a start or a resume holds nothing yet (the copy is written by updates only), so
 * the passes cast the weights as before.
 *
 * @example
 * const at = paramsMirror(buffers, local, groups, params); // attach
 * engine.stepScope?.(tf, model, at?.(step));               // each step
 */
import type { ParamsMirror } from '../engine/engine.js';
import type { ParameterGroup } from '../model/parameter-layout.js';
import { paramsBf16Of, type SharedBuffers } from './shared-buffers.js';

export function paramsMirror(
  buffers: SharedBuffers,
  device: number,
  groups: readonly ParameterGroup[],
  params: Float32Array,
): ((step: number) => ParamsMirror) | undefined {
  const copy = paramsBf16Of(buffers, device, groups.length);
  if (!copy) return undefined;
  return step => ({
    params,
    bits: copy.bits,
    holds(start, end) {
      if (end <= start) return false;
      for (let g = 0; g < groups.length; g++) {
        const group = groups[g];
        if (group.end <= start || group.start >= end) continue;
        if (Atomics.load(copy.steps, g) !== step - 1) return false;
      }
      return groups.length > 0 && groups[0].start <= start && end <= groups[groups.length - 1].end;
    },
  });
}
