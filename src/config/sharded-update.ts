/** Whether one process's devices can update by shards (localUpdate 'shard'). */
import type { ResolvedConfig } from '../config-types.js';

/**
 * Whether one process's devices can update by shards (localUpdate 'shard', the comm worker's reduce-scatter): several
 * devices of one process on the in-process shared-memory transport, the sharded all-reduce, no comm hook (it
 * exchanges whole groups), the ready order (priority exchanges chunks), `onNan: 'error'` (a device sees only its
 * shard's gradient, so it could not skip the whole step).
 */
export function shardedUpdateApplies(r: ResolvedConfig): boolean {
  return (
    r.topology.processes === 1 &&
    r.topology.localDevices > 1 &&
    r.transport === 'shared-memory' &&
    r.allReduce === 'sharded' &&
    !r.commHook &&
    r.exchange.order === 'ready' &&
    r.onNan === 'error'
  );
}
