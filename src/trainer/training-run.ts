/**
 * The main-thread side of one run, in parts along Horovod's seams: the threads and their failures (run-threads.ts),
 * set-up (run-setup.ts: spawn the device actors and build their models, lay out shared memory and the loader;
 * run-world.ts: several hosts; run-start.ts: attach, restore, start the exchange, finish), checkpointing
 * (checkpointing.ts), the controller (run-controller.ts: stop vote, agreement across hosts), the stall inspector
 * (stall-inspector.ts) and the step loop (step-loop.ts: loading step s+1 while step s trains, checkpoints on the way).
 * This file runs the phases in order and ends every thread whether the run succeeds or fails; the first failure of
 * any thread rejects the run with the device, step, phase and the code it was raised with.
 */
import type { ResolvedConfig } from '../config-types.js';
import { paramSlots } from '../actors/shared-buffers.js';
import type { StrategySpec } from '../pipeline/strategy.js';
import type { StoreServer } from '../collectives/gloo/tcp-store-server.js';
import { getMethod } from '../methods/method-registry.js';
import type { TrainingMethod } from '../methods/training-method.js';
import { hostFlags, modelFlags, type HostFlags } from '../world/host-flags.js';
import { checkRoomForResults, resultNeeds } from '../output/room-for-results.js';
import { RunLedger } from './run-ledger.js';
import { finishSummary } from './run-summary.js';
import type { TrainHooks, TrainSummary } from './run-types.js';
import type { StopRequest } from './stop-request.js';
import { ReplicaCheck } from './replica-check.js';
import { WorldMonitor } from './world-monitor.js';
import { RunThreads } from './run-threads.js';
import { StallInspector } from './stall-inspector.js';
import { RunController } from './run-controller.js';
import { RunCheckpointing } from './checkpointing.js';
import { seedOptimizerState } from './seed-optimizer-state.js';
import { checkLink, layOut, spawn, type LaidOut } from './run-setup.js';
import { joinWorld, type JoinedWorld } from './run-world.js';
import { attach, finish, restore, startExchange, type StartContext } from './run-start.js';
import { StepLoop } from './step-loop.js';
import { hostGather } from './host-gather.js';
import type { Checkpoint } from '../checkpoint/checkpoint-file.js';
import type { EngineDevice } from '../engine/engine.js';
import { precisionLabel } from '../engine/backend.js';
import { completedState, type CompletedState } from './completed-state.js';
import { EpochLogs } from './epoch-logs.js';

/** An elastic run's generation (elastic-run.ts): it keeps what a lost host needs, and may go on from memory. */
export interface ElasticGeneration {
  /** The state the survivors agreed on, to go on from (instead of `resume`); absent: the run's own start. */
  resume?: Checkpoint;
  /** --min-hosts, which every host must share. */
  minHosts?: number;
  /** Host 0: whether a host waits to be admitted (the hosts then end the generation at the next step they agree on). */
  regroupWanted?: () => boolean;
  /** Host 0: its model as flags once built, for the restarted hosts that ask to be admitted (join-requests.ts). */
  onModelFlags?: (flags: HostFlags) => void;
}

/** An elastic run's generation that ended after `step` to admit a host: the run goes on in the next generation. */
export interface Regrouping {
  kind: 'regroup';
  step: number;
}

export class TrainingRun {
  private readonly threads: RunThreads;
  private readonly stalls: StallInspector;
  private readonly controller: RunController;
  private readonly checkpoints: RunCheckpointing;
  private readonly method: TrainingMethod;
  private readonly ledger: RunLedger;
  private laidOut?: LaidOut;
  private world?: JoinedWorld;
  /** Several hosts: host 0 sees the world's metrics, spans and warnings (world-monitor.ts); its hooks are `hooks`. */
  private readonly monitor: WorldMonitor;
  private readonly hooks: TrainHooks;
  private replicaCheck: ReplicaCheck;
  /** With config.epochLogs: validation, early stopping, the epochs' logs. */
  private readonly epochLogs?: EpochLogs;

  constructor(
    private readonly cfg: ResolvedConfig,
    private readonly strategy: StrategySpec,
    outerHooks: TrainHooks,
    private readonly auto?: TrainSummary['auto'],
    stopRequest?: StopRequest,
    private readonly served?: StoreServer,
    private readonly elastic?: ElasticGeneration,
  ) {
    this.monitor = new WorldMonitor(cfg, outerHooks);
    this.epochLogs = cfg.epochLogs && new EpochLogs(cfg, this.monitor.hooks);
    this.hooks = this.epochLogs?.hooks ?? this.monitor.hooks;
    this.replicaCheck = new ReplicaCheck(cfg);
    this.method = getMethod(cfg.method);
    this.ledger = new RunLedger(cfg, this.hooks, err => this.threads.fail(err));
    this.threads = new RunThreads(cfg.topology, cfg.stallTimeoutMs, this.ledger, (silent, unanswered) =>
      this.stalls.nameHungThread(silent, unanswered),
    );
    this.stalls = new StallInspector(this.threads, cfg.stallTimeoutMs, cfg.topology);
    this.controller = new RunController(this.threads, cfg.steps, cfg.stopGraceMs, this.hooks.shouldStop, stopRequest);
    this.controller.regroupWanted = elastic?.regroupWanted;
    this.checkpoints = new RunCheckpointing(
      cfg,
      this.threads,
      this.method,
      this.ledger,
      this.hooks,
      () => this.world?.channel,
    );
  }

  /** The run's summary; an elastic generation that ends to admit a host: the step it ends after. */
  async run(): Promise<TrainSummary | Regrouping> {
    const failed = this.threads.failed();
    const unlisten = this.controller.listen();
    try {
      // Aborted before it began (stop signals during auto's profiling, abort() at once): nothing is started.
      return await Promise.race([this.threads.failure ? failed : this.drive(), failed]);
    } catch (err) {
      const { abortCause, stepInFlight, firstStep } = this.controller;
      if (abortCause) {
        await this.threads.endThreads(); // nothing moves in shared memory any more
        const aborted = await this.checkpoints.abortedError(abortCause, stepInFlight, firstStep, this.laidOut);
        await this.monitor.failed(aborted);
        throw aborted;
      }
      await this.monitor.failed(this.threads.failure ?? err);
      throw this.threads.failure ?? err;
    } finally {
      unlisten?.();
      this.controller.close();
      await this.threads.endThreads();
      await this.monitor.close();
      await this.epochLogs?.close();
      this.checkpoints.store?.close();
      this.world?.channel?.close();
      await this.world?.server?.close();
    }
  }

  private async drive(): Promise<TrainSummary | Regrouping> {
    const started = performance.now();
    const { cfg, threads } = this;
    await this.checkpoints.open();
    await this.joinWorld();
    const watchdogMs = this.stalls.setupWatchdogMs();
    const built = await spawn(threads, cfg, watchdogMs);
    const model = modelFlags(built);
    await this.world?.channel?.agreeOnFlags(model, 'model');
    this.elastic?.onModelFlags?.(model);
    await checkRoomForResults(resultNeeds(cfg, built.layout.total, built.stateTotal)); // before step 1, not at the end
    const checkpoints = this.checkpoints.store !== undefined;
    // an elastic run keeps the pre-update copy an abort checkpoint keeps: the state of the last completed step
    const elastic = this.elastic !== undefined;
    const context = {
      ...{ threads, cfg, method: this.method, strategy: this.strategy },
      ...{ checkpoints: checkpoints || elastic, elastic },
    };
    const laidOut = await layOut(context, built);
    this.laidOut = laidOut;
    checkLink(cfg, laidOut.groups);
    const resume = this.elastic?.resume ?? (cfg.resume ? await this.checkpoints.loadResume(built) : undefined);
    const firstStep = (resume?.step ?? 0) + 1;
    this.controller.firstStep = firstStep;
    this.announceStart(built, firstStep);
    const loading = laidOut.load(firstStep);
    loading.catch(() => {}); // awaited in the step loop; a failure must not be unhandled meanwhile
    const start: StartContext = { threads, cfg, method: this.method, world: this.world, watchdogMs };
    await attach(start, laidOut);
    if (resume) await restore(threads, laidOut, resume);
    else await seedOptimizerState(cfg, laidOut);
    const shareHookState = checkpoints || this.checkpoints.sendsHeads();
    const { resumeSource } = this.checkpoints;
    await startExchange(start, laidOut, { firstStep, resume, resumeSource, shareHookState, hooks: this.hooks });
    this.hooks.onEvent?.({ type: 'ready', parameters: built.layout.total, groups: laidOut.groups.length });
    const loop = await this.stepLoop(laidOut, firstStep, loading).run();
    if (loop.regroupAfter !== undefined) return { kind: 'regroup', step: loop.regroupAfter };
    const finished = await finish(start, this.ledger, laidOut.groups.length, { firstStep, lastStep: loop.lastStep });
    loop.history = await this.monitor.finish(loop.history);
    return finishSummary({
      ...{ epochs: this.epochLogs?.summary(), cfg, method: this.method, layout: built.layout },
      ...{ weights: built.weights, state: built.state, groups: laidOut.groups },
      replica: paramSlots(laidOut.buffers)[0],
      firstStep,
      loop,
      finished,
      ledger: this.ledger,
      auto: this.auto,
      wallSeconds: (performance.now() - started) / 1000,
      hooks: this.hooks,
      engineDevices: built.engineDevices,
    });
  }

  /** The `started` event: what this run (this generation) trains on, and from which step. */
  private announceStart(built: { engineDevices?: EngineDevice[] }, firstStep: number): void {
    const { cfg } = this;
    this.hooks.onEvent?.({
      type: 'started',
      devices: cfg.devices,
      backend: cfg.backend,
      method: cfg.method,
      strategy: cfg.strategy,
      steps: cfg.steps,
      firstStep,
      stepsPerEpoch: cfg.stepsPerEpoch,
      ...(cfg.lrSchedule ? { lrSchedule: cfg.lrSchedule.kind } : {}),
      precision: precisionLabel(cfg.backend, cfg.precision),
      ...(built.engineDevices ? { engineDevices: built.engineDevices } : {}),
    });
  }

  /**
   * After the run failed (every thread ended): the state of the last step every group of this host completed, in
   * memory; undefined when it cannot be rebuilt (completed-state.ts).
   */
  /** The state of the newest step every group completed, or of `target` (an older one, when the copy holds it). */
  completedState(target?: number): CompletedState | undefined {
    return completedState(this.threads.control, this.laidOut, this.controller.firstStep, target);
  }

  private stepLoop(laidOut: LaidOut, firstStep: number, loading: Promise<void>): StepLoop {
    const { threads, controller, checkpoints, stalls, replicaCheck, monitor, ledger, hooks } = this;
    const parts = { threads, controller, checkpoints, stalls, replicaCheck, monitor, ledger, hooks };
    return new StepLoop(this.cfg, parts, laidOut, firstStep, loading);
  }

  /** Several hosts: the world joined, the hosts' flags agreed, the replica check and the monitor on the hosts' line. */
  private async joinWorld(): Promise<void> {
    const world = await joinWorld(this.cfg, this.stalls.setupWatchdogMs(), w => (this.world = w), this.served);
    if (!world?.channel) return;
    this.controller.channel = world.channel;
    const hosts = this.hooks.atHostsMet && hostGather(this.cfg, 'start', this.stalls.setupWatchdogMs());
    if (hosts) await this.hooks.atHostsMet!(hosts);
    await world.channel.agreeOnFlags(hostFlags(this.cfg, this.auto !== undefined, this.elastic?.minHosts));
    this.replicaCheck = new ReplicaCheck(this.cfg, world.channel);
    await this.monitor.open(world.channel, spans => this.ledger.recordSpans(spans));
  }
}
