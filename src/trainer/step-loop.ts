/**
 * Phase 4, the step loop: the steps, with checkpoints; ends early when a stop is agreed. Step s+1 is posted while step
 * s trains, once its inputs are loaded (postAhead), so a compute thread starts it the moment it ends step s instead
 * of waiting for the main thread's round trip; its forward still waits for each group of step s.
 */
import { metricValues } from '../model/metric-values.js';
import type { ResolvedConfig } from '../config-types.js';
import { paramSlots } from '../actors/shared-buffers.js';
import type { Reply } from './compute-replies.js';
import { warmupSteps, type StepLoopResult } from './run-summary.js';
import type { TrainHooks } from './run-types.js';
import type { RunThreads } from './run-threads.js';
import type { RunController } from './run-controller.js';
import type { RunCheckpointing } from './checkpointing.js';
import type { StallInspector } from './stall-inspector.js';
import type { ReplicaCheck } from './replica-check.js';
import type { WorldMonitor } from './world-monitor.js';
import type { RunLedger } from './run-ledger.js';
import type { LaidOut } from './run-setup.js';
import { checkLoss } from './loss-check.js';
import { stepLoss } from './step-loss.js';
import { lrAt } from '../optim/lr-schedule.js';
import { batchSamplesAt } from '../data/sampler.js';
import { atEpochEnd, epochEndDue, type EpochEndConfig } from './epoch-end.js';

/** A step posted to every device: its replies, and when its inputs were loaded. */
interface PostedStep {
  done: Promise<Reply<'stepDone'>[]>;
  loadedAt: number;
}

/** The parts of the run the step loop drives. */
export interface StepLoopParts {
  threads: RunThreads;
  controller: RunController;
  checkpoints: RunCheckpointing;
  stalls: StallInspector;
  replicaCheck: ReplicaCheck;
  monitor: WorldMonitor;
  ledger: RunLedger;
  hooks: TrainHooks;
}

type LoopConfig = Pick<
  ResolvedConfig,
  | 'steps'
  | 'stepsPerEpoch'
  | 'perDevice'
  | 'topology'
  | 'batch'
  | 'trainSize'
  | 'partialBatch'
  | 'onNan'
  | 'optimizer'
  | 'lrSchedule'
> &
  EpochEndConfig;

export class StepLoop {
  /** Step s+1 posted ahead while step s trains (undefined: not posted ahead). */
  private ahead: Promise<PostedStep | undefined> = Promise.resolve(undefined);
  /** The inputs of the next step to post, loading. */
  private loading: Promise<void>;
  private readonly result: StepLoopResult;

  constructor(
    private readonly cfg: LoopConfig,
    private readonly parts: StepLoopParts,
    private readonly laidOut: LaidOut,
    private readonly firstStep: number,
    loading: Promise<void>,
  ) {
    this.loading = loading;
    this.result = {
      lastStep: cfg.steps,
      history: [],
      computeTotal: 0,
      loadWaitTotal: 0,
      steadyCompute: 0,
      stepStarts: [],
      warmup: firstStep - 1 + warmupSteps(cfg.steps - firstStep + 1),
      replayedSteps: 0,
      trainStart: performance.now(),
    };
  }

  async run(): Promise<StepLoopResult> {
    const { cfg, parts } = this;
    parts.controller.stepsBegin();
    for (let step = this.firstStep; step <= cfg.steps; step++) {
      parts.controller.stepInFlight = step;
      if ((step - 1) % cfg.stepsPerEpoch === 0)
        parts.hooks.onEvent?.({ type: 'epoch', epoch: Math.floor((step - 1) / cfg.stepsPerEpoch) + 1, step });
      const { results, t0, nextPosted, dataWaitMs } = await this.train(step);
      this.recordStep(step, results, t0, dataWaitMs);
      parts.controller.stepReported(step, this.laidOut.groups.length);
      if (await this.stopsAfter(step, nextPosted)) break;
    }
    parts.controller.stepsOver();
    return this.result;
  }

  /** Step `step` trained (posted now, or ahead while the step before trained); step+1 posted ahead when it can be. */
  private async train(step: number) {
    const { cfg, result } = this;
    const t0 = performance.now();
    const postedAhead = await this.ahead;
    const waitFrom = performance.now();
    const current = postedAhead ?? (await this.loadedAndPosted(step, this.loading));
    let dataWaitMs = postedAhead ? 0 : current.loadedAt - waitFrom;
    result.stepStarts.push(t0);
    // Step s+1's inputs go into the other slot (step s-1's, finished) while step s trains; posted ahead, step s
    // was posted once step s-1 had ended, which started loading them then.
    if (step < cfg.steps && !postedAhead) this.startLoading(step + 1);
    this.ahead = this.postAhead(step, this.loading, current.done);
    this.ahead.catch(() => {}); // awaited at the next step
    const results = await current.done;
    const ended = performance.now();
    const next = await this.ahead; // step s+1 posted (or not); a load slower than step s is waited for here
    // the inputs' wait alone (several hosts: not the verdict's)
    if (next) dataWaitMs += Math.max(0, next.loadedAt - ended);
    result.loadWaitTotal += dataWaitMs;
    if (next && step + 1 < cfg.steps) this.startLoading(step + 2); // step s's slot is free now
    return { results, t0, nextPosted: next !== undefined, dataWaitMs };
  }

  private startLoading(step: number): void {
    this.loading = this.laidOut.load(step);
    this.loading.catch(() => {}); // awaited when the step is posted; a failure must not be unhandled meanwhile
  }

  /** After `step`: onStepApplied, the replica check, the stop vote and the checkpoint; true when the run stops here. */
  private async stopsAfter(step: number, nextPosted: boolean): Promise<boolean> {
    const { cfg, laidOut, result } = this;
    const { hooks, replicaCheck, controller, checkpoints } = this.parts;
    const replicas = paramSlots(laidOut.buffers);
    if (hooks.onStepApplied || replicaCheck.due(step)) await this.parts.threads.applied(laidOut.groups.length, step);
    hooks.onStepApplied?.(step, replicas, laidOut.layout);
    if (replicaCheck.due(step)) await replicaCheck.afterApplied(step, replicas);
    const epochStop = await atEpochEnd(this.parts, laidOut, cfg, step);
    const stopping = (await controller.stopAfter(step, nextPosted)) || epochStop;
    // an elastic run's generation ending to admit a host: no stop checkpoint (it goes on from memory)
    const regroup = controller.regroupAfter === step && !epochStop;
    const disarmGrace = () => controller.stepsOver();
    const stopCheckpoint = stopping && !regroup;
    if (checkpoints.due(step, stopCheckpoint))
      await checkpoints.write(laidOut, step, stopCheckpoint ? disarmGrace : undefined);
    if (stopping) disarmGrace();
    if (regroup) result.regroupAfter = step;
    if (regroup) result.lastStep = step;
    if (regroup || !stopping || step >= cfg.steps) return regroup;
    result.lastStep = step;
    result.stoppedAt = step;
    hooks.onEvent?.({ type: 'stopped', step });
    return true;
  }

  /** Step `step` posted to every device, once its inputs (`loading`) are loaded. */
  private async loadedAndPosted(step: number, loading: Promise<void>): Promise<PostedStep> {
    const { stalls } = this.parts;
    // the first step's batch may wait on its loader thread's start (its modules, the data's first read): setup's
    await stalls.withinStallTimeout(loading, step, step === this.firstStep ? stalls.setupWatchdogMs() : undefined);
    return { ...this.postStep(step), loadedAt: performance.now() };
  }

  /** `before`: the step before, when this one is posted ahead while it trains: the watchdog starts when it ends. */
  private postStep(step: number, before?: Promise<unknown>): Omit<PostedStep, 'loadedAt'> {
    const { threads, stalls } = this.parts;
    // The first step waits on the comm threads' start (joining the communicator, the step-0 broadcast): setup's
    // watchdog.
    const watchdog = step === this.firstStep ? stalls.setupWatchdogMs() : undefined;
    const done = threads.replies.expect('stepDone', step, watchdog, before);
    for (const a of threads.actors) a.postCompute({ type: 'step', step });
    return { done };
  }

  /**
   * Step `step`+1 posted while `step` trains (its inputs in `loading`), or undefined when the main thread has work
   * between the two steps that needs every device idle or decides whether to go on: a checkpoint, a replica check,
   * onStepApplied, a stop due after `step` (one host: wished for now; several: agreed after step-1), the last step.
   * A stop wished for later ends the run after step+1 (several hosts: its wish is added before step+2 is posted, agreed
   * once step+1 is applied, so the run ends after step+2).
   */
  private async postAhead(
    step: number,
    loading: Promise<void>,
    done: Promise<unknown>,
  ): Promise<PostedStep | undefined> {
    const { hooks, replicaCheck, checkpoints, stalls, threads, controller } = this.parts;
    const waits = hooks.onStepApplied || replicaCheck.due(step) || epochEndDue(hooks, this.cfg.stepsPerEpoch, step);
    if (step >= this.cfg.steps || waits || checkpoints.due(step, false)) return undefined;
    await stalls.withinStallTimeout(loading, step + 1);
    const loadedAt = performance.now();
    if (threads.failure) return undefined;
    if (await controller.stopDueWhileTraining(this.laidOut.groups.length, step)) return undefined;
    // the first step is setup's to its update (a cold comm thread's first exchange and update): the next one's watchdog
    // starts once it is applied everywhere, or after setup's watchdog
    const groups = this.laidOut.groups.length;
    const first = () => threads.appliedWithin(groups, step, stalls.setupWatchdogMs());
    return { ...this.postStep(step + 1, step === this.firstStep ? done.then(first) : done), loadedAt };
  }

  /** Step `step`'s replies: the loss checked, the ledger, the history and the monitor. */
  private recordStep(step: number, results: Reply<'stepDone'>[], t0: number, dataWaitMs: number): void {
    const { cfg, result } = this;
    checkLoss(step, results, cfg, this.parts.hooks);
    this.parts.ledger.stepDone(step, results);
    const counts = results.map(r => r.count);
    const samples = counts.reduce((s, n) => s + n, 0);
    const loss = stepLoss(
      results.map(r => r.loss),
      counts,
      cfg.perDevice,
    );
    // This process's devices' samples (the whole global batch on one host; several hosts: host 0's monitor sees the
    // world's).
    const correct = results.reduce((s, r) => s + r.correct, 0);
    const accuracy = correct / samples;
    const sums = results[0].metrics?.map((_, i) => results.reduce((s, r) => s + (r.metrics?.[i] ?? 0), 0));
    const lr = lrAt(cfg.lrSchedule, cfg.optimizer.lr, step);
    this.parts.hooks.onHostStep?.({ step, samples, loss, correct, lr, ...(sums ? { metricSums: sums } : {}) });
    // The period: since the previous step was recorded (the first: since its loop iteration began), so that what the
    // loop does between steps (a checkpoint, the hosts' stop agreement, a replica check) counts, as it does in the wall
    // time.
    const now = performance.now();
    const stepMs = now - (result.lastRecordedAt ?? t0);
    result.lastRecordedAt = now;
    const computeMs = results.map(r => r.computeMs);
    result.computeTotal += Math.max(...computeMs);
    if (step > result.warmup) result.steadyCompute += Math.max(...computeMs);
    result.history.push({ step, loss, accuracy });
    if (results.every(r => r.replayed)) result.replayedSteps++;
    const numTensors = results.map(r => r.numTensors);
    this.parts.monitor.step(
      { step, losses: results.map(r => r.loss), correct, stepMs, computeMs, numTensors, dataWaitMs },
      {
        ...{ step, loss, accuracy, lr, stepMs, dataWaitMs },
        ...{ samplesPerSecond: batchSamplesAt(cfg.trainSize, cfg.batch, cfg.partialBatch, step) / (stepMs / 1000) },
        ...{ computeMs, numTensors },
        ...(sums ? { metrics: metricValues(sums) } : {}),
      },
    );
  }
}
