/**
 * A world of one device on one CPU updates on its compute thread. With nothing to exchange, the comm thread's only
 * work in a step is the update, and on one CPU it cannot overlap backward: each wake-up of the comm thread and each
 * report it sends costs the step. So the compute thread applies each group's update itself once backward has handed
 * the group over, through the same stages as the comm thread's (comm-stages.ts: the pre-update copy, the optimizer
 * update, the bf16 copy, "applied"), and the reports go to the main thread with the step's reply.
 *
 * Where it applies (`updatesOnCompute`): one device in the world, one process, not elastic, the process limited to one
 * CPU (taskset, a container's cpuset), no communication hook, emulated link, priority order or plugin. With a second
 * CPU the comm thread's update runs beside backward, which is faster. TANDEM_UPDATE_ON_COMPUTE=on|off overrides the
 * choice (tests and benches).
 */
import { availableParallelism } from 'node:os';
import type { ResolvedConfig } from '../config-types.js';
import type { ControlBlock } from '../pipeline/control-block.js';
import type { GroupExchange } from '../pipeline/events.js';
import type { FlatArithmetic } from '../optim/flat-arithmetic.js';
import { wallNow } from '../monitor/span.js';
import { updateStages, type ApplySource } from './comm-stages.js';
import { exchangedReport, type ExchangedReport } from './exchanged-report.js';

/** Whether the run's one device updates on its compute thread (`cpus`: the CPUs this process may run on). */
export function updatesOnCompute(
  cfg: Pick<ResolvedConfig, 'devices' | 'topology' | 'commHook' | 'link' | 'exchange' | 'plugins' | 'localUpdate'>,
  elastic: boolean,
  cpus: number = availableParallelism(),
): boolean {
  const eligible =
    cfg.devices === 1 &&
    cfg.topology.processes === 1 &&
    !elastic &&
    !cfg.commHook &&
    !cfg.link &&
    cfg.exchange.order === 'ready' &&
    cfg.plugins.length === 0 &&
    cfg.localUpdate !== 'shard';
  const forced = process.env.TANDEM_UPDATE_ON_COMPUTE;
  if (forced === 'off') return false;
  return eligible && (forced === 'on' || cpus === 1);
}

export class InlineUpdate {
  private readonly apply: (unit: GroupExchange) => Promise<GroupExchange>;

  constructor(
    private readonly source: ApplySource,
    private readonly control: ControlBlock,
    arithmetic: FlatArithmetic,
  ) {
    const { local } = source.device;
    this.apply = updateStages(source, control, (s, p) => control.setPhase(local, p, s, 'comm'), arithmetic);
  }

  /**
   * Step `step`'s update of every group backward handed over (none when it handed nothing over: a non-finite loss
   * under onNan 'error', which the main thread reports), in order; their reports.
   */
  async run(step: number): Promise<ExchangedReport[]> {
    const { device, groups } = this.source;
    const reports: ExchangedReport[] = [];
    for (let g = 0; g < groups.length; g++) {
      if (this.control.gradsReady(device.local, g) < step) break;
      const now = wallNow();
      const done = await this.apply({ step, group: g, waitStart: now, waitEnd: now });
      reports.push(exchangedReport(device.rank, groups, 'compute', done, [], 0));
    }
    this.control.setPhase(device.local, 'idle', step, 'comm'); // the stall inspector looks at busy sides only
    return reports;
  }
}
