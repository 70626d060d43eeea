/**
 * Hung-thread detection (Horovod's stall inspector): the setup watchdog, a load that outlives the stall timeout, and
 * which thread stopped when a reply does not come. Threads that wait bump their heartbeat every wait slice; one whose
 * heartbeat stands still while it is busy (not idle) is hung.
 */
import { TandemError } from '../errors.js';
import { setupWatchdogMs, WAIT_SLICE_MS } from '../pipeline/control-block.js';
import { globalRank, type Topology } from '../world/topology.js';
import { peerWaitMs } from '../world/peer-wait.js';
import { runningTimeout } from './running-timeout.js';
import type { RunThreads } from './run-threads.js';

export class StallInspector {
  constructor(
    private readonly threads: RunThreads,
    private readonly stallTimeoutMs: number,
    private readonly topology: Topology,
  ) {}

  /**
   * Setup (loading an engine, building the model, the first broadcast) is not a step: a device still doing
   * it on a busy machine is slow, not hung. It gets the setup watchdog (control-block.ts), as the threads' waits on
   * each other in the first step do.
   */
  setupWatchdogMs(): number {
    return setupWatchdogMs(this.stallTimeoutMs);
  }

  /**
   * `promise` (a step's loading), or a STALLED failure naming the loader's device if it takes longer than the watchdog
   * allows: the stall timeout, or `ms` (the first step's: setup's, its loader thread may still be starting).
   */
  async withinStallTimeout<T>(promise: Promise<T>, step: number, ms = this.stallTimeoutMs): Promise<T> {
    let cancel = () => {};
    const timeout = new Promise<never>((_, reject) => {
      // This process's running time (runningTimeout): a host stopped for a while (SIGSTOP) is not its loader's fault.
      cancel = runningTimeout(ms, () => {
        const d = [...(this.threads.loader?.pending ?? [])][0] ?? -1;
        reject(
          new TandemError(
            'STALLED',
            `device ${d} stopped responding at step ${step} in phase load (data loader: no result for ` +
              `${(ms / 1000).toFixed(1)} s; raise stallTimeoutMs if loading is legitimately this slow)`,
            { device: d, step, phase: 'load' },
          ),
        );
      });
    });
    try {
      return await Promise.race([promise, timeout]);
    } finally {
      cancel();
    }
  }

  /**
   * Which thread stopped. Several hosts: a busy thread still beating waits on
   * another host, which is slow, not dead (a checkpoint write, a warm-up): its own wait ends by itself (PEER_LOST, or
   * STALLED naming the host after twice stallTimeoutMs), so look again until then, or until the reply came (none then).
   * Falls back to the first silent device.
   */
  async nameHungThread(silent: number[], unanswered: () => boolean): Promise<TandemError | undefined> {
    const patience = Date.now() + (this.topology.processes > 1 ? peerWaitMs(this.stallTimeoutMs) : 0);
    for (;;) {
      const look = await this.lookForHungThread();
      if (!unanswered()) return undefined;
      if (look.hung) return look.hung;
      if (!look.waiting || this.threads.failure || Date.now() >= patience) break;
    }
    const d = silent[0] ?? 0;
    const { phase, step } = this.threads.control.phaseOf(d - globalRank(this.topology, 0));
    return new TandemError(
      'STALLED',
      `device ${d} sent no report for ${(this.stallTimeoutMs / 1000).toFixed(1)} s at step ${step} in phase ${phase} ` +
        `(silent: device ${silent.join(', ')}; raise stallTimeoutMs if a step is legitimately this slow)`,
      { device: d, step, phase },
    );
  }

  /**
   * One look at the heartbeats (over a few wait slices): a busy thread that stood still, and whether a busy one beat.
   */
  private async lookForHungThread(): Promise<{ hung?: TandemError; waiting: boolean }> {
    const { control, actors } = this.threads;
    const sides = ['compute', 'comm'] as const;
    const before = actors.map(a => sides.map(s => control.heartbeat(a.identity.local, s)));
    await new Promise(r => setTimeout(r, 6 * WAIT_SLICE_MS));
    let waiting = false;
    for (const [i, a] of actors.entries()) {
      for (const [j, side] of sides.entries()) {
        const { phase, step } = control.phaseOf(a.identity.local, side);
        if (phase === 'idle' || phase === 'done') continue;
        if (control.heartbeat(a.identity.local, side) !== before[i][j]) {
          waiting = true;
          continue;
        }
        return {
          waiting,
          hung: new TandemError(
            'STALLED',
            `device ${a.identity.rank} stopped responding at step ${step} in phase ${phase} (${side} thread: ` +
              `no sign of life for ${(this.stallTimeoutMs / 1000).toFixed(1)} s; ` +
              'raise stallTimeoutMs if a step is legitimately this slow)',
            { device: a.identity.rank, step, phase },
          ),
        };
      }
    }
    return { waiting };
  }
}
