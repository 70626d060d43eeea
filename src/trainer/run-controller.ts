/**
 * The run's controller (Horovod's controller): whether to stop, agreed between hosts so that every host stops after
 * the same step; a stop request's grace period and the abort it turns into when the grace runs out.
 */
import { TandemError } from '../errors.js';
import type { HostChannel, StepVerdict } from '../world/host-channel.js';
import type { StopKind, StopRequest } from './stop-request.js';
import type { TrainHooks } from './run-types.js';
import type { RunThreads } from './run-threads.js';

export type AbortCause = 'request' | 'grace';

/**
 * An abort first lets the updates of the last step every device reported done land (a reported step is a completed
 * one to the user: its line is printed), for at most this long: a thread hung in its update must not hold the abort.
 */
const ABORT_SETTLE_MS = 2000;

export class RunController {
  /** The step the devices are training (0 before the first). */
  stepInFlight = 0;
  /** The first step this run trains (after a resumed checkpoint's). */
  firstStep = 1;
  /** Several hosts: this host's line to the others (set once the world is joined). */
  channel?: HostChannel;
  /** Set when the run was aborted (`abort()`, or a stop that outlived its grace period). */
  abortCause?: AbortCause;
  /** The last step every local device reported done (its update may still be landing), and its group count. */
  private reported?: { step: number; groupCount: number };
  private stepping: 'before' | 'stepping' | 'after' = 'before';
  private graceTimer?: NodeJS.Timeout;
  /**
   * An elastic run's host 0: whether a host waits to join (trainer/elastic-run.ts): its wish after each step is then
   * to regroup.
   */
  regroupWanted?: () => boolean;
  /** Several hosts: the step after which they agreed to end the generation and regroup (admitting a host). */
  regroupAfter?: number;
  /** Several hosts: the stop verdict read for a step (stopAgreedBefore). */
  private verdict?: { step: number; agreed: Promise<StepVerdict> };
  /** Several hosts: the last step after which this host added its stop wish (wishAfter). */
  private wished = 0;

  constructor(
    private readonly threads: RunThreads,
    private readonly steps: number,
    private readonly stopGraceMs: number,
    private readonly shouldStop?: TrainHooks['shouldStop'],
    private readonly stopRequest?: StopRequest,
  ) {}

  /** Listens to the stop request; returns the unlisten function. */
  listen(): (() => void) | undefined {
    return this.stopRequest?.listen(kind => this.onStopRequest(kind));
  }

  /**
   * stop: the step loop ends after the step in flight, which has `stopGraceMs` to reach its stop checkpoint; abort:
   * now.
   */
  private onStopRequest(kind: StopKind): void {
    if (kind === 'abort') {
      this.abort('request');
      return;
    }
    if (this.stepping === 'after' || this.graceTimer) return;
    this.graceTimer = setTimeout(() => this.abort('grace'), this.stopGraceMs);
  }

  private abort(cause: AbortCause): void {
    if (this.threads.failure || this.abortCause) return;
    this.abortCause = cause;
    const { reported } = this;
    const settled = reported
      ? this.threads.appliedWithin(reported.groupCount, reported.step, ABORT_SETTLE_MS)
      : Promise.resolve();
    // the error the run rejects with is made once the checkpoint is written
    void settled.then(() => this.threads.fail(new TandemError('ABORTED', 'run aborted')));
  }

  /** Every local device reported `step` done (its loss is recorded); its update, in `groupCount` groups, may follow. */
  stepReported(step: number, groupCount: number): void {
    this.reported = { step, groupCount };
  }

  /** The step loop began. */
  stepsBegin(): void {
    this.stepping = 'stepping';
  }

  /** No stop can abort the run any more: its stop checkpoint is in hand, or the steps are over. */
  stepsOver(): void {
    clearTimeout(this.graceTimer);
    this.stepping = 'after';
  }

  /** The grace timer, cleared (the run ends). */
  close(): void {
    clearTimeout(this.graceTimer);
  }

  stopWanted(): boolean {
    return this.shouldStop?.() === true || this.stopRequest?.requested !== undefined;
  }

  /**
   * Whether to stop after `step`: asked here; several hosts: asked on any host after the step before, agreed between
   * them (host-channel.ts), so every host stops after the same step, one or two steps after the request. `nextPosted`:
   * step+1
   * was posted ahead (postAhead), which it is only when no stop is due after `step`; a wish made since goes to step+1.
   */
  async stopAfter(step: number, nextPosted: boolean): Promise<boolean> {
    if (!this.channel) return this.stopWanted() && !nextPosted;
    return this.agreedElseWish(step);
  }

  /** Several hosts: whether they agreed to stop after `step`; when not, this host's wish after `step`, added (once). */
  private async agreedElseWish(step: number): Promise<boolean> {
    const verdict = await this.stopAgreedBefore(step);
    if (verdict === 'regroup') this.regroupAfter = step;
    if (verdict === 'go-on') await this.wishAfter(step);
    return verdict !== 'go-on';
  }

  /**
   * Several hosts: this host's stop wish after `step`, added once, before step+1 is posted (postAhead, or the loop's
   * next step): a peer waiting for it then never waits on a host that is gone, since that host either added it or never
   * ran step+1, whose all-reduce fails on the peer with PEER_LOST naming it.
   */
  private async wishAfter(step: number): Promise<void> {
    if (this.wished >= step || step >= this.steps) return;
    this.wished = step;
    // a regroup after the last step would admit a host to nothing
    const regroup = step + 1 < this.steps && this.regroupWanted?.() === true;
    await this.channel!.submitStop(step, this.stopWanted(), regroup);
  }

  /**
   * While `step` trains: whether to stop after it (one host: wished for now). Several hosts: the stop verdict, read
   * once this host applied step-1 (every host then ended step-1, so its wish is in: each adds it before posting
   * `step`); no stop: this host's wish after `step`, added.
   */
  async stopDueWhileTraining(groupCount: number, step: number): Promise<boolean> {
    if (!this.channel) return this.stopWanted();
    if (step > this.firstStep) await this.threads.applied(groupCount, step - 1);
    return this.agreedElseWish(step);
  }

  /** Several hosts: what they agreed to do after `step` (the wishes made after step-1); read once per step. */
  private stopAgreedBefore(step: number): Promise<StepVerdict> {
    const channel = this.channel!;
    if (this.verdict?.step !== step) {
      const agreed = step > this.firstStep ? channel.stepVerdict(step - 1) : Promise.resolve<StepVerdict>('go-on');
      agreed.catch(() => {}); // awaited by whoever asked
      this.verdict = { step, agreed };
    }
    return this.verdict.agreed;
  }
}
