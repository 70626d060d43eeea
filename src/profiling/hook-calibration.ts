/**
 * The comm hooks' compute, calibrated at start on this model's own gradient.
 * The rates of hook-costs.ts come from small kernels; a real exchange runs
 * more passes over arrays far larger than the caches (the hosts bench saw the
 * hooks' steps 1.1–1.5x their prediction). So, as the profiler scales the
 * layers' times to a real step, `--strategy auto --comm-hook auto` runs each
 * hook's real exchange — the registered hook itself, on the comm thread's
 * code path (native kernels when the addon is loaded) — on the model's first
 * variables in transmission order (up to CALIBRATION_FLOATS, and at least one
 * matrix PowerSGD compresses), as rank 0 of the run's ranks over a collective
 * that moves nothing across a link (the link's time and CPU are the link
 * fit's), and keeps measured / predicted per hook: `HookCosts.scale`.
 *
 * @example
 * const scale = await calibrateHookScales(layout, ['fp16', 'powersgd'], machine);
 * // { fp16: 1.4, powersgd: 1.2 }: the schedule model multiplies each hook's compute by it
 */
import type { Collective } from '../collectives/collective.js';
import type { ParameterGroup, ParameterLayout, ParameterSpec } from '../model/parameter-layout.js';
import { DEFAULT_COMM_HOOK_OPTIONS, type CommHookOptions } from '../pipeline/comm-hook.js';
import { getCommHook } from '../pipeline/comm-hooks.js';
import { HookStates } from '../pipeline/hook-states.js';
import { compressibleShape } from '../pipeline/hooks/power-sgd.js';
import type { CompressionHook } from './hook-costs.js';
import { hookComputeMs, type Machine } from './schedule-model.js';

/** Floats of the calibration's gradient (64 MiB): far beyond the caches, as a large model's groups are. */
export const CALIBRATION_FLOATS = 16 << 20;
/** Exchanges timed after the warm-up when one is predicted under this; else one. */
const QUICK_MS = 50;

/** Per hook: its real exchange's time over hookComputeMs's prediction of it (undefined where nothing was timed). */
export async function calibrateHookScales(
  layout: ParameterLayout,
  hooks: readonly CompressionHook[],
  machine: Machine,
): Promise<Partial<Record<CompressionHook, number>>> {
  const scale: Partial<Record<CompressionHook, number>> = {};
  const plain: Machine = { ...machine, hookCosts: { ...machine.hookCosts, scale: undefined } };
  for (const hook of hooks) {
    const group = calibrationGroup(layout, hook, machine.powerSgd);
    const predicted = hookComputeMs(layout, group, hook, plain);
    if (!(predicted > 0)) continue;
    scale[hook] = (await timeExchange(layout, group, hook, machine, predicted)) / predicted;
  }
  return scale;
}

/**
 * The first variables in transmission order up to CALIBRATION_FLOATS; for PowerSGD through its first compressed matrix.
 */
export function calibrationGroup(
  layout: ParameterLayout,
  hook: CompressionHook,
  powerSgd: Machine['powerSgd'],
): ParameterGroup {
  let end = 0,
    compressed = false;
  for (const v of layout.variables) {
    const needed = hook === 'powersgd' && !compressed;
    if (end + v.size > CALIBRATION_FLOATS && end > 0 && !needed) break;
    end = v.offset + v.size;
    compressed ||= compressibleShape(v.shape, powerSgd.rank, powerSgd.minCompressionRate) !== undefined;
  }
  return { name: 'calibration', start: 0, end };
}

/**
 * The best time of the hook's exchange of `group` (after one warm-up exchange, which also draws PowerSGD's first Q).
 */
async function timeExchange(
  layout: ParameterLayout,
  group: ParameterGroup,
  hook: CompressionHook,
  machine: Machine,
  predictedMs: number,
): Promise<number> {
  const ranks = machine.link?.ranks ?? machine.localDevices;
  const options: CommHookOptions = { ...DEFAULT_COMM_HOOK_OPTIONS, ...machine.powerSgd, startStep: 0 };
  const variables: ParameterSpec[] = layout.variables.filter(v => v.offset + v.size <= group.end);
  const states = new HookStates(getCommHook(hook), options, [group], variables, 0, ranks, 1);
  const { info, state } = states.groups[0];
  const values = new Float32Array(group.end - group.start).map((_, j) => Math.sin(j) * 1e-3);
  const gradient = new Float32Array(values.length);
  const collective = silentCollective(ranks);
  let best = Infinity;
  const reps = predictedMs < QUICK_MS ? 4 : 2;
  for (let i = 0; i < reps; i++) {
    gradient.set(values); // the exchange leaves the mean in it
    const t0 = performance.now();
    await states.hook.exchange({ ...info, buffer: gradient, step: i }, state, collective);
    if (i > 0) best = Math.min(best, performance.now() - t0);
  }
  return best;
}

/**
 * Rank 0 of `size` ranks that hold what it holds: an all-reduce leaves the buffer as it is (the mean of equal
 * buffers), an all-gather writes this rank's part into every rank's place (as a transport writes what it receives).
 */
function silentCollective(size: number): Collective {
  return {
    transport: 'calibration',
    rank: 0,
    size,
    allReduce: async () => {},
    allGather: async (mine, all) => {
      for (let r = 0; r < size; r++) all.set(mine, r * mine.length);
    },
    broadcast: async () => {},
    barrier: async () => {},
    close: () => {},
  };
}
