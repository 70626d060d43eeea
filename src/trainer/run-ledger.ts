/**
 * What the main thread records of a run as reports arrive: the spans of every
 * thread, the comm threads' exchange reports (timings, what the collectives
 * carried, skipped updates), non-finite gradients, the last checkpoint.
 * `allExchangesReported` waits for the comm threads' last reports, which
 * travel on another port than compute's and can arrive after `finished`.
 */
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import type { FromComm, FromCompute } from '../actors/protocol.js';
import type { Span } from '../monitor/span.js';
import type { TrainHooks } from './run-types.js';

export class RunLedger {
  readonly spans: Span[] = [];
  readonly commStats = { exchangeMs: 0, updateMs: 0, count: 0, wireFloats: 0 };
  /** onNan 'skip-step': the (step, group) updates skipped, and the first offending variable per step. */
  readonly skipped: { step: number; group: number }[] = [];
  readonly nonFinite = new Map<number, string>();
  /**
   * What the collectives carried in the run's first step (1, or the one after a resumed checkpoint), per device message
   * (float ranges of the shared layout).
   */
  readonly carried: { start: number; end: number }[] = [];
  /** The step `carried` is taken from: the first one reported (every device starts at the same step). */
  private carriedStep?: number;
  lastCheckpoint?: string;
  /** 'exchanged' reports received per local device, and who waits for a count of them. */
  private readonly exchangedBy: number[];
  private readonly firstRank: number;
  private exchangedWaiter?: () => void;

  constructor(
    private readonly cfg: ResolvedConfig,
    private readonly hooks: TrainHooks,
    private readonly fail: (err: TandemError) => void,
  ) {
    this.exchangedBy = new Array<number>(cfg.topology.localDevices).fill(0);
    this.firstRank = cfg.topology.process * cfg.topology.localDevices;
  }

  /**
   * Several hosts: spans of this host are stamped with it (host 0 records the other hosts' spans too, stamped there).
   */
  recordSpans(spans: Span[]): void {
    const { topology } = this.cfg;
    if (topology.processes > 1) for (const s of spans) s.host ??= topology.process;
    if ((this.cfg.trace || this.cfg.out) && this.spans.length < 500_000) this.spans.push(...spans);
    this.hooks.onSpans?.(spans);
  }

  stepDone(step: number, results: Extract<FromCompute, { type: 'stepDone' }>[]): void {
    const offender = results.find(r => r.nonFinite);
    if (offender) this.nonFinite.set(step, `${offender.nonFinite} on device ${offender.device}`);
  }

  checkpointWritten(path: string): void {
    this.lastCheckpoint = path;
  }

  exchanged(msg: Extract<FromComm, { type: 'exchanged' }>): void {
    this.exchangedBy[msg.device - this.firstRank]++;
    this.exchangedWaiter?.();
    this.recordSpans(msg.spans);
    this.commStats.exchangeMs += msg.exchangeMs;
    this.commStats.updateMs += msg.updateMs;
    this.commStats.count++;
    this.commStats.wireFloats += msg.wireFloats;
    this.carriedStep ??= msg.step;
    if (msg.step === this.carriedStep) this.carried.push(msg.carried);
    if (msg.skipped && msg.device === 0) {
      this.skipped.push({ step: msg.step, group: msg.group });
      this.hooks.onEvent?.({
        type: 'warning',
        step: msg.step,
        message: `update of group ${msg.group} skipped: non-finite averaged gradient`,
      });
    }
  }

  /**
   * Resolves when every local device's comm thread has reported `need` exchanges (STALLED after the watchdog's time).
   */
  allExchangesReported(need: number, lastStep: number): Promise<void> {
    const complete = () => this.exchangedBy.every(n => n >= need);
    if (complete()) return Promise.resolve();
    return new Promise(resolve => {
      const timer = setTimeout(() => {
        const local = Math.max(
          0,
          this.exchangedBy.findIndex(n => n < need),
        );
        const d = this.firstRank + local;
        this.fail(
          new TandemError(
            'STALLED',
            `device ${d}'s comm thread reported ${this.exchangedBy[local]} of ${need} exchanges ` +
              (`${(this.cfg.stallTimeoutMs / 1000).toFixed(1)} s after training finished (raise stallTimeoutMs if ` +
                `the link is legitimately this slow)`),
            { device: d, step: lastStep, phase: 'exchange' },
          ),
        );
      }, this.cfg.stallTimeoutMs);
      timer.unref();
      this.exchangedWaiter = () => {
        if (!complete()) return;
        clearTimeout(timer);
        this.exchangedWaiter = undefined;
        resolve();
      };
    });
  }
}
