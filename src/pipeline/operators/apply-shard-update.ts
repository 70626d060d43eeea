import { concatMap, type OperatorFunction } from '#rxjs';
import type { OptimizerConfig } from '../../optim/flat-optimizer.js';
import { JS_ARITHMETIC, type FlatArithmetic } from '../../optim/flat-arithmetic.js';
import { wallNow } from '../../monitor/span.js';
import type { GroupExchange } from '../events.js';

/** One process's replicas in shared memory: each device's parameters and its optimizer state arrays. */
export interface LocalReplicas {
  params: Float32Array[];
  states: Float32Array[][];
}

/**
 * Applies the optimizer update of this device's shard of a group (reduceScatterGroup: its averaged gradient is in
 * `grads` over `unit.shard`) once, to this device's parameters and state, and writes the result into every other
 * replica of the process; then waits at `barrier` until every device has done the same for its shard, so that the
 * whole group is updated in every replica when it returns (and no peer still reads this device's gradient slot). The
 * update runs element by element, so each replica holds the bits a full update of its own would give.
 *
 * @example
 * of(unit).pipe(reduceScatterGroup(…), applyShardUpdate(optimizer, replicas, 0, grads, () => collective.barrier()),
 * publishApplied(…));
 */
export function applyShardUpdate(
  optimizer: OptimizerConfig,
  replicas: LocalReplicas,
  device: number,
  grads: Float32Array,
  barrier: () => Promise<void>,
  arithmetic: FlatArithmetic = JS_ARITHMETIC,
): OperatorFunction<GroupExchange, GroupExchange> {
  return concatMap(async unit => {
    if (!unit.shard)
      throw new Error(
        `applyShardUpdate: step ${unit.step} group ${unit.group} carries no shard (reduceScatterGroup first)`,
      );
    const [s, e] = unit.shard;
    const applyStart = wallNow();
    const { params, states } = replicas;
    arithmetic.applyUpdate(optimizer, params[device], grads, states[device], s, e, unit.step);
    for (let r = 0; r < params.length; r++) {
      if (r === device || e <= s) continue;
      params[r].set(params[device].subarray(s, e), s);
      states[device].forEach((state, k) => states[r][k].set(state.subarray(s, e), s));
    }
    await barrier();
    return { ...unit, applyStart, applyEnd: wallNow() };
  });
}
