/**
 * The main-thread side of one run, in phases: spawn the device actors and
 * build their models; lay out shared memory, communicators and the loader;
 * restore a checkpoint; the step loop (loading step s+1 while step s trains,
 * checkpoints on the way); finish and export; the summary. Every thread ends
 * whether the run succeeds or fails; the first failure of any thread rejects
 * the run with the device, step, phase and the code it was raised with.
 */
import type { ResolvedConfig } from '../config-types.js';
import type { EngineDevice } from '../engine/engine.js';
import { TandemError } from '../errors.js';
import { ControlBlock, WAIT_SLICE_MS } from '../actors/control-block.js';
import { DeviceActor, deviceError } from '../actors/device-actor.js';
import {
  allocateModelBuffers,
  optimizerStateOf,
  paramSlots,
  registeredSlots,
  type SharedBuffers,
} from '../actors/shared-buffers.js';
import type { FromComm, FromCompute, FinishedReport, WeightShape } from '../actors/protocol.js';
import { allocateInputBuffers, ShardLoadError, type ShardLoader } from '../data/shard-loader.js';
import { isWorkerOutOfMemory, outOfMemoryWords } from '../actors/worker-memory.js';
import { runningTimeout } from './running-timeout.js';
import { sampleSize } from '../data/dataset.js';
import { layoutParameters, type ParameterGroup, type ParameterLayout } from '../model/parameter-layout.js';
import { chunksOf } from '../pipeline/priority-schedule.js';
import { checkLinkHolds } from '../pipeline/link-model.js';
import { fillInitialOptimizerState, optimizerStateSlots } from '../optim/flat-optimizer.js';
import { optimizerNaNHint } from '../optim/tfjs-updates.js';
import { exchangeGroups, MAX_GROUPS, type StrategySpec } from '../pipeline/strategy.js';
import { getTransport } from '../collectives/transport-registry.js';
import type { PreparedCommunicator } from '../collectives/transport.js';
import { getMethod } from '../methods/method-registry.js';
import type { TrainingMethod } from '../methods/training-method.js';
import type { Checkpoint, HeadState } from '../checkpoint/checkpoint-file.js';
import {
  checkpointDirOf,
  checkResume,
  earlierRunWarning,
  hookStartsAfresh,
  readResumeBytes,
  restoreShared,
  skippedCheckpointsWarning,
  takeCheckpoint,
} from '../checkpoint/run-checkpoints.js';
import { HookStateSlots } from './hook-state-slots.js';
import { CheckpointStore } from '../checkpoint/checkpoint-store.js';
import { StepPreimage } from '../actors/step-preimage.js';
import { writeAbortCheckpoint } from './abort-checkpoint.js';
import { globalRank, localRanks } from '../world/topology.js';
import { addressTowards, serveRendezvous, storeUrl } from '../world/rendezvous.js';
import { hostFlags } from '../world/host-flags.js';
import type { StoreServer } from '../collectives/gloo/tcp-store-server.js';
import { HostChannel } from '../world/host-channel.js';
import { ComputeReplies, type Reply } from './compute-replies.js';
import { checkRoomForResults, resultNeeds } from '../output/room-for-results.js';
import { RunLedger } from './run-ledger.js';
import { finishSummary, warmupSteps, type StepLoopResult } from './run-summary.js';
import type { TrainHooks, TrainSummary } from './run-types.js';
import type { StopKind, StopRequest } from './stop-request.js';
import { ReplicaCheck } from './replica-check.js';
import { WorldMonitor } from './world-monitor.js';
import { peerWaitMs } from '../world/peer-wait.js';

/** How long a PEER_LOST failure waits for the lost peer's own error (in this process), which names the cause. */
const PEER_LOST_GRACE_MS = 500;
/** How long a device may take to set up (engine, model, first broadcast) before it is called hung; see setupWatchdogMs. */
const SETUP_WATCHDOG_MS = 60_000;

/** Phase 1's result: the model every replica built (trainable weights in `layout`, non-trainable ones in `state`). */
interface Built {
  weights: WeightShape[];
  layout: ParameterLayout;
  state: WeightShape[];
  stateTotal: number;
  batchNormLayers: string[];
  /** Per local device, the accelerator its engine opened (webgpu); undefined on the CPU engines. */
  engineDevices?: EngineDevice[];
}

/** A step posted to every device: its replies, and when its inputs were loaded. */
interface PostedStep {
  done: Promise<Reply<'stepDone'>[]>;
  loadedAt: number;
}

/** Phase 2's result: where everything lives. */
interface LaidOut extends Built {
  groups: ParameterGroup[];
  buffers: SharedBuffers;
  load(step: number): Promise<void>;
}

export class TrainingRun {
  private readonly control: ControlBlock;
  private readonly controlBuffer: SharedArrayBuffer;
  private readonly actors: DeviceActor[] = [];
  private readonly method: TrainingMethod;
  private readonly replies: ComputeReplies;
  private readonly ledger: RunLedger;
  private loader?: ShardLoader;
  private failure?: TandemError;
  private peerLost?: NodeJS.Timeout;
  private rejectRun?: (err: TandemError) => void;
  private store?: CheckpointStore;
  /** With a communication hook and checkpoints: the comm threads' shared hook state. */
  private hookSlots?: HookStateSlots;
  /** Where the resumed checkpoint was read (for messages). */
  private resumeSource?: string;
  private laidOut?: LaidOut;
  private firstStep = 1;
  /** The step the devices are training (0 before the first). */
  private stepInFlight = 0;
  private stepping: 'before' | 'stepping' | 'after' = 'before';
  /** Set when the run was aborted (`abort()`, or a stop that outlived its grace period). */
  private abortCause?: 'request' | 'grace';
  private graceTimer?: NodeJS.Timeout;
  private ending?: Promise<void>;
  /** Several hosts: host 0's store (on host 0), the address this host's ranks listen on, this host's line to the others. */
  private world?: { server?: StoreServer; hostname: string; channel?: HostChannel };
  /** Several hosts: the stop verdict read for a step (stopAgreedBefore). */
  private verdict?: { step: number; agreed: Promise<boolean> };
  /** Several hosts: the last step after which this host added its stop wish (wishAfter). */
  private wished = 0;
  /** Several hosts: host 0 sees the world's metrics, spans and warnings (world-monitor.ts); its hooks are `hooks`. */
  private readonly monitor: WorldMonitor;
  private readonly hooks: TrainHooks;
  private replicaCheck: ReplicaCheck;

  constructor(
    private readonly cfg: ResolvedConfig,
    private readonly strategy: StrategySpec,
    outerHooks: TrainHooks,
    private readonly auto?: TrainSummary['auto'],
    private readonly stopRequest?: StopRequest,
    private readonly served?: StoreServer,
  ) {
    this.monitor = new WorldMonitor(cfg, outerHooks);
    this.hooks = this.monitor.hooks;
    this.replicaCheck = new ReplicaCheck(cfg);
    const local = cfg.topology.localDevices;
    this.method = getMethod(cfg.method);
    const groupCount = MAX_GROUPS; // control words for as many groups as any strategy may use
    this.controlBuffer = new SharedArrayBuffer(ControlBlock.byteLength(local, groupCount));
    this.control = new ControlBlock(this.controlBuffer, local, groupCount, cfg.stallTimeoutMs);
    for (let d = 0; d < local; d++) {
      for (let g = 0; g < groupCount; g++) {
        // sequence words start "before step 0"
        this.control.markGradsReady(d, g, -1);
        this.control.markApplied(d, g, -1);
      }
      this.control.setPhase(d, 'setup', 0, 'compute');
      this.control.setPhase(d, 'setup', 0, 'comm');
    }
    this.replies = new ComputeReplies(
      localRanks(cfg.topology),
      cfg.stallTimeoutMs,
      (silent, unanswered) =>
        void this.nameHungThread(silent, unanswered).then(err => {
          if (err) this.fail(err);
        }),
    );
    this.ledger = new RunLedger(cfg, this.hooks, err => this.fail(err));
  }

  async run(): Promise<TrainSummary> {
    const failed = new Promise<never>((_, reject) => {
      this.rejectRun = reject;
    });
    failed.catch(() => {});
    const unlisten = this.stopRequest?.listen(kind => this.onStopRequest(kind));
    try {
      // Aborted before it began (stop signals during auto's profiling, abort() at once): nothing is started.
      return await Promise.race([this.failure ? failed : this.drive(), failed]);
    } catch (err) {
      if (this.abortCause) {
        await this.endThreads(); // nothing moves in shared memory any more
        const aborted = await this.abortedError(this.abortCause);
        await this.monitor.failed(aborted);
        throw aborted;
      }
      await this.monitor.failed(this.failure ?? err);
      throw this.failure ?? err;
    } finally {
      unlisten?.();
      clearTimeout(this.graceTimer);
      await this.endThreads();
      await this.monitor.close();
      this.store?.close();
      this.world?.channel?.close();
      await this.world?.server?.close();
    }
  }

  /**
   * Setup goes on only while the run lives: a failure or an abort while setup awaited something ends it there, before
   * it starts threads that the run's end (which has already happened) would not close.
   */
  private throwIfEnded(): void {
    if (this.failure) throw this.failure;
  }

  /** Every thread of the run ends (once). */
  private endThreads(): Promise<void> {
    this.ending ??= (async () => {
      this.control.abort();
      await Promise.all(this.actors.map(a => a.close()));
      await this.loader?.close();
    })();
    return this.ending;
  }

  /** stop: the step loop ends after the step in flight, which has `stopGraceMs` to reach its stop checkpoint; abort: now. */
  private onStopRequest(kind: StopKind): void {
    if (kind === 'abort') {
      this.abort('request');
      return;
    }
    if (this.stepping === 'after' || this.graceTimer) return;
    this.graceTimer = setTimeout(() => this.abort('grace'), this.cfg.stopGraceMs);
  }

  private abort(cause: 'request' | 'grace'): void {
    if (this.failure) return;
    this.abortCause = cause;
    this.fail(new TandemError('ABORTED', 'run aborted')); // the error the run rejects with is made once the checkpoint is written
  }

  private async drive(): Promise<TrainSummary> {
    const started = performance.now();
    await this.openCheckpointStore();
    await this.joinWorld();
    const built = await this.spawn();
    await checkRoomForResults(resultNeeds(this.cfg, built.layout.total, built.stateTotal)); // before step 1, not at the end
    const laidOut = await this.layOut(built);
    this.laidOut = laidOut;
    this.checkLink(laidOut.groups);
    const resume = this.cfg.resume ? await this.loadResume(built) : undefined;
    const firstStep = (resume?.step ?? 0) + 1;
    this.firstStep = firstStep;
    const cfg = this.cfg;
    this.hooks.onEvent?.({
      type: 'started',
      devices: cfg.devices,
      backend: cfg.backend,
      method: cfg.method,
      strategy: cfg.strategy,
      steps: cfg.steps,
      firstStep,
      stepsPerEpoch: cfg.stepsPerEpoch,
      ...(built.engineDevices ? { engineDevices: built.engineDevices } : {}),
    });
    let loading = laidOut.load(firstStep);
    loading.catch(() => {}); // awaited in the step loop; a failure must not be unhandled meanwhile
    await this.attach(laidOut);
    if (resume) await this.restore(laidOut, resume);
    await this.startExchange(laidOut, firstStep, resume);
    this.hooks.onEvent?.({ type: 'ready', parameters: built.layout.total, groups: laidOut.groups.length });
    const loop = await this.stepLoop(laidOut, firstStep, loading);
    const finished = await this.finish(laidOut, firstStep, loop.lastStep);
    loop.history = await this.monitor.finish(loop.history);
    return finishSummary({
      cfg,
      method: this.method,
      layout: built.layout,
      weights: built.weights,
      state: built.state,
      groups: laidOut.groups,
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

  /** The checkpoint directory, cleared of temporaries that interrupted writes left. */
  private async openCheckpointStore(): Promise<void> {
    const dir = checkpointDirOf(this.cfg);
    if (!dir) return;
    this.store = new CheckpointStore(dir, this.cfg.keepCheckpoints);
    const earlier = await earlierRunWarning(this.cfg, dir);
    if (earlier) this.hooks.onEvent?.({ type: 'warning', step: 0, message: earlier });
    const stale = await this.store.removeStaleTemporaries();
    if (stale.length > 0) {
      this.hooks.onEvent?.({
        type: 'warning',
        step: 0,
        message: `removed ${stale.length} temporary file(s) that interrupted checkpoint writes left in ${dir}: ${stale.join(', ')}`,
      });
    }
  }

  /**
   * Setup (loading an engine, building the model, the first broadcast) is not a step: a device still doing
   * it on a busy machine is slow, not hung. It gets SETUP_WATCHDOG_MS, or the stall timeout when that is longer.
   */
  private setupWatchdogMs(): number {
    return Math.max(this.cfg.stallTimeoutMs, SETUP_WATCHDOG_MS);
  }

  /** Phase 1: one actor per local device; each builds its replica and reports its variables. */
  private async spawn(): Promise<Built> {
    this.throwIfEnded();
    const { cfg } = this;
    const built = this.replies.expect('built', undefined, this.setupWatchdogMs());
    for (let d = 0; d < cfg.topology.localDevices; d++) {
      const actor = new DeviceActor({ local: d, rank: globalRank(cfg.topology, d) }, this.control, {
        onCompute: m => this.onCompute(m),
        onComm: m => this.onComm(m),
        onFailure: e => this.fail(e),
      });
      this.actors.push(actor);
      actor.postCompute({
        type: 'init',
        device: actor.identity,
        config: cfg,
        control: this.controlBuffer,
        groupCount: MAX_GROUPS,
      });
    }
    const reports = await built;
    const { weights, state, batchNormLayers } = reports[0];
    for (const r of reports) {
      if (
        JSON.stringify([r.weights, r.state].map(ws => ws.map(w => w.shape))) !==
        JSON.stringify([weights, state].map(ws => ws.map(w => w.shape)))
      ) {
        throw new TandemError(
          'BAD_CONFIG',
          `device ${r.device} built a model with different variables than device ${reports[0].device}; the model factory must be deterministic in shape`,
        );
      }
    }
    const stateTotal = state.reduce((n, w) => n + w.shape.reduce((a, b) => a * b, 1), 0);
    const devices = reports.map(r => r.engineDevice);
    const engineDevices = devices.every((d): d is EngineDevice => d !== undefined) ? devices : undefined;
    return { weights, layout: layoutParameters(weights), state, stateTotal, batchNormLayers, engineDevices };
  }

  /** An emulated link slower than the stall watchdog allows is refused before step 1 (it would fail as STALLED). */
  private checkLink(groups: readonly ParameterGroup[]): void {
    const { link, exchange, commHook, devices, stallTimeoutMs } = this.cfg;
    if (!link) return;
    const chunked = exchange.order === 'priority' && !commHook; // with a hook, groups are not cut
    const holds = groups.flatMap(g => (chunked ? chunksOf(g, exchange.chunkFloats) : [g]).map(u => u.end - u.start));
    checkLinkHolds(link, devices, holds, stallTimeoutMs);
  }

  /** Phase 2: exchange groups, shared buffers, the data loader. */
  private async layOut(built: Built): Promise<LaidOut> {
    const { cfg } = this;
    const groups = exchangeGroups(this.strategy, built.layout, cfg.strategyOptions);
    const local = cfg.topology.localDevices;
    const input = allocateInputBuffers(local, cfg.perDevice, sampleSize(cfg.sampleShape));
    const buffers: SharedBuffers = {
      control: this.controlBuffer,
      ...allocateModelBuffers(local, built.layout.total, optimizerStateSlots(cfg.optimizer), built.stateTotal),
      ...input,
      // The pre-update copy serves the abort checkpoint, written when the run's whole state is in shared memory.
      preimage:
        this.store && !this.method.localState && built.stateTotal === 0 && !cfg.commHook
          ? StepPreimage.allocate(groups.length, built.layout.total, optimizerStateSlots(cfg.optimizer))
          : undefined,
    };
    for (let d = 0; d < local; d++) fillInitialOptimizerState(cfg.optimizer, optimizerStateOf(buffers, d)); // adagrad's accumulator
    this.loader = await this.method.createLoader(cfg, input);
    if (this.failure) {
      // the run ended while the loader started: endThreads may not have seen it
      const loader = this.loader;
      this.loader = undefined;
      await loader.close();
      throw this.failure;
    }
    const load = (step: number) =>
      this.loader!.fill(step).catch((err: unknown) => {
        const device = err instanceof ShardLoadError ? err.device : -1;
        const cause = err instanceof ShardLoadError ? err.cause : err;
        const [code, what] = isWorkerOutOfMemory(cause)
          ? (['OUT_OF_MEMORY', outOfMemoryWords('its data loader thread')] as const)
          : (['DATA_FAILED', (err as Error).message] as const);
        throw new TandemError(
          code,
          `device ${device} failed at step ${step} in phase load (data loader): ${what}`,
          { device, step, phase: 'load' },
          { cause },
        );
      });
    return { ...built, groups, buffers, load };
  }

  /**
   * Several hosts: host 0 serves the store at the rendezvous (or takes over `served`, the store train() opened to
   * agree on an auto strategy); every host finds the address it reaches it from.
   */
  private async joinWorld(): Promise<void> {
    const { rendezvous, topology } = this.cfg;
    if (!rendezvous) return;
    const server = topology.process === 0 ? (this.served ?? (await serveRendezvous(rendezvous))) : undefined;
    this.world = { server, hostname: '' };
    this.world.hostname = await addressTowards(rendezvous, this.setupWatchdogMs());
    this.world.channel = await HostChannel.open(
      storeUrl(rendezvous),
      topology,
      this.setupWatchdogMs(),
      peerWaitMs(this.cfg.stallTimeoutMs),
      this.world.hostname,
    );
    await this.world.channel.agreeOnFlags(hostFlags(this.cfg, this.auto !== undefined));
    this.replicaCheck = new ReplicaCheck(this.cfg, this.world.channel);
    await this.monitor.open(this.world.channel, spans => this.ledger.recordSpans(spans));
  }

  /** The checkpoint to resume from, checked against this run; several hosts: host 0 reads it and sends it to the others. */
  private async loadResume({ weights, state }: Built): Promise<Checkpoint> {
    const channel = this.world?.channel;
    const bytes = channel
      ? await channel.shareCheckpoint(() => readResumeBytes(this.cfg))
      : await readResumeBytes(this.cfg);
    this.resumeSource = bytes.source;
    const ckpt = checkResume(this.cfg, bytes, weights, state);
    const skipped = skippedCheckpointsWarning(this.cfg, ckpt, bytes); // host 0's (it read the directory); the others get bytes only
    if (skipped) this.hooks.onEvent?.({ type: 'warning', step: 0, message: skipped });
    return ckpt;
  }

  /**
   * Whether to stop after `step`: asked here; several hosts: asked on any host after the step before, agreed between
   * them (host-channel.ts), so every host stops after the same step, one or two steps after the request. `nextPosted`: step+1
   * was posted ahead (postAhead), which it is only when no stop is due after `step`; a wish made since goes to step+1.
   */
  private async stopAfter(step: number, nextPosted: boolean): Promise<boolean> {
    if (!this.world?.channel) return this.stopWanted() && !nextPosted;
    return this.agreedElseWish(step);
  }

  /** Several hosts: whether they agreed to stop after `step`; when not, this host's wish after `step`, added (once). */
  private async agreedElseWish(step: number): Promise<boolean> {
    const agreed = await this.stopAgreedBefore(step);
    if (!agreed) await this.wishAfter(step);
    return agreed;
  }

  /**
   * Several hosts: this host's stop wish after `step`, added once, before step+1 is posted (postAhead, or the loop's
   * next step): a peer waiting for it then never waits on a host that is gone, since that host either added it or never
   * ran step+1, whose all-reduce fails on the peer with PEER_LOST naming it.
   */
  private async wishAfter(step: number): Promise<void> {
    if (this.wished >= step || step >= this.cfg.steps) return;
    this.wished = step;
    await this.world!.channel!.submitStop(step, this.stopWanted());
  }

  /**
   * Several hosts, while `step` trains: the stop verdict, read once this host applied step-1 (every host then ended
   * step-1, so its wish is in: each adds it before posting `step`); no stop: this host's wish after `step`, added.
   */
  private async agreedOnceApplied(groups: ParameterGroup[], step: number): Promise<boolean> {
    if (step > this.firstStep) await this.applied(groups, step - 1);
    return this.agreedElseWish(step);
  }

  /** Several hosts: whether they agreed to stop after `step` (the wishes made after step-1); read once per step. */
  private stopAgreedBefore(step: number): Promise<boolean> {
    const channel = this.world!.channel!;
    if (this.verdict?.step !== step) {
      const agreed = step > this.firstStep ? channel.stopAgreed(step - 1) : Promise.resolve(false);
      agreed.catch(() => {}); // awaited by whoever asked
      this.verdict = { step, agreed };
    }
    return this.verdict.agreed;
  }

  /** A communicator of this process's devices on the run's transport (several hosts: of every host's devices, by global rank). */
  private async communicator(
    name: string,
    buffers: SharedBuffers | undefined,
    stagingFloats: number,
  ): Promise<PreparedCommunicator> {
    const { cfg, world } = this;
    const { topology } = cfg;
    return getTransport(cfg.transport).prepare({
      name,
      size: topology.localDevices,
      registered: buffers ? registeredSlots(buffers) : [],
      stagingFloats,
      options: { allReduce: cfg.allReduce },
      world: world &&
        cfg.rendezvous && {
          store: storeUrl(cfg.rendezvous),
          rankOffset: globalRank(topology, 0),
          worldSize: cfg.devices,
          hostname: world.hostname,
          ranksPerProcess: topology.localDevices,
          processKind: topology.processKind,
          key: `tandem.${name}`,
        },
    });
  }

  /**
   * Every compute thread gets the shared buffers, and the compute communicator when something communicates
   * between the compute threads: a method (Partial FC), or BatchNormalization layers on more than one device.
   */
  private async attach({ buffers, groups, batchNormLayers }: LaidOut): Promise<void> {
    const { cfg } = this;
    const needs = this.method.computeCommunicator(cfg);
    const batchNorm = batchNormLayers.length > 0 && cfg.devices > 1;
    if (batchNorm && cfg.batchNorm === 'sync' && !getTransport(cfg.transport).blocking) {
      throw new TandemError(
        'BAD_CONFIG',
        `the model's BatchNormalization layers (${batchNormLayers.join(', ')}) need a collective inside forward and ` +
          `backward for batchNorm 'sync', which transport '${cfg.transport}' cannot complete there; use batchNorm: 'local' (--batch-norm local) or the shared-memory transport`,
      );
    }
    const compute =
      needs || batchNorm
        ? await this.communicator('compute', undefined, Math.max(needs?.stagingFloats ?? 0, 1 << 16))
        : undefined;
    const initialised = this.replies.expect('initialised', undefined, this.setupWatchdogMs());
    for (const a of this.actors) {
      a.postCompute(
        { type: 'buffers', buffers, groups, collective: compute?.handles[a.identity.local] },
        compute?.transfer[a.identity.local],
      );
    }
    await initialised;
  }

  /** Phase 3: a checkpoint's shared parameters and optimizer state, and the devices' local state. */
  private async restore({ buffers }: LaidOut, resume: Checkpoint): Promise<void> {
    restoreShared(buffers, resume);
    if (!resume.heads) return;
    const restored = this.replies.expect('headRestored');
    for (const a of this.actors) a.postCompute({ type: 'restoreHead', head: resume.heads[a.identity.rank] });
    await restored;
  }

  /** The comm threads start, each with its end of the gradient communicator (and its hook state from the checkpoint). */
  private async startExchange(
    { buffers, groups, layout }: LaidOut,
    firstStep: number,
    resume?: Checkpoint,
  ): Promise<void> {
    const gradients = await this.communicator('gradients', buffers, 1 << 16);
    const share = this.cfg.commHook !== undefined && (this.store !== undefined || this.sendsHeads());
    if (share) this.hookSlots = new HookStateSlots(this.actors.map(a => a.identity.rank));
    const afresh = resume && hookStartsAfresh(this.cfg, resume);
    if (afresh) this.hooks.onEvent?.({ type: 'warning', step: resume.step, message: afresh });
    for (const a of this.actors) {
      const hookState = this.cfg.commHook && {
        share,
        restore: resume?.commHook?.ranks[a.identity.rank],
        source: this.resumeSource,
      };
      a.startComm(
        {
          type: 'start',
          device: a.identity,
          config: this.cfg,
          control: this.controlBuffer,
          buffers,
          groups,
          variables: layout.variables,
          collective: gradients.handles[a.identity.local],
          firstStep,
          hookState,
        },
        gradients.transfer[a.identity.local],
      );
    }
  }

  /** Resolves when every device applied every group of `step`. */
  private applied(groups: ParameterGroup[], step: number): Promise<void> {
    return Promise.all(
      this.actors.flatMap(a => groups.map((_, g) => this.control.waitAppliedAsync(a.identity.local, g, step))),
    ).then(() => undefined);
  }

  /**
   * Several hosts, a method with local heads or a communication hook, a host other than 0: at each checkpoint its
   * devices' heads and hook state go to host 0, which writes the checkpoint (it holds every device's state then: the
   * file one process of the same world would write).
   */
  private sendsHeads(): boolean {
    return (
      (this.method.localState || this.cfg.commHook !== undefined) &&
      this.cfg.topology.process !== 0 &&
      this.world?.channel !== undefined
    );
  }

  /** `taken`: called once the checkpoint's values are in hand (before the file is written). */
  private async checkpoint(laidOut: LaidOut, step: number, taken?: () => void): Promise<void> {
    await this.applied(laidOut.groups, step);
    let heads: HeadState[] | undefined;
    let modelState: { weights: WeightShape[]; values: Float32Array } | undefined;
    if (this.method.localState || laidOut.stateTotal > 0) {
      const snaps = await this.snapshots(step);
      if (this.method.localState) heads = snaps.map(m => m.head!);
      modelState = { weights: laidOut.state, values: snaps[0].state! };
    }
    let hooks = await this.hookSlots?.values();
    const channel = this.world?.channel;
    if (!this.store) {
      // a host other than 0 (sendsHeads): host 0 writes
      taken?.();
      await channel!.sendHeads(step, { heads, hooks });
      return;
    }
    if ((heads || hooks) && channel) ({ heads, hooks } = await channel.collectHeads(step, { heads, hooks }));
    const { commHook } = this.cfg;
    const checkpoint = takeCheckpoint(
      this.cfg,
      step,
      laidOut.weights,
      laidOut.buffers,
      heads,
      modelState,
      commHook && hooks && { name: commHook.name, options: commHook.options, ranks: hooks },
    );
    taken?.();
    const written = await this.store!.write(checkpoint);
    this.ledger.checkpointWritten(written);
    this.hooks.onEvent?.({ type: 'checkpoint', step, path: written });
  }

  /** Every device's local state (its head) and non-trainable weights, as of the step it finished last. */
  private async snapshots(step: number) {
    const snaps = this.replies.expect('headSnapshot', step);
    for (const a of this.actors) a.postCompute({ type: 'snapshotHead', step });
    return snaps;
  }

  /**
   * Phase 4: the steps, with checkpoints; ends early when `shouldStop` says so. Step s+1 is posted while step s
   * trains, once its inputs are loaded (postAhead), so a compute thread starts it the moment it ends step s instead
   * of waiting for the main thread's round trip; its forward still waits for each group of step s.
   */
  private async stepLoop(laidOut: LaidOut, firstStep: number, loading: Promise<void>): Promise<StepLoopResult> {
    const { cfg, hooks } = this;
    const result: StepLoopResult = {
      lastStep: cfg.steps,
      history: [],
      computeTotal: 0,
      loadWaitTotal: 0,
      steadyCompute: 0,
      stepStarts: [],
      warmup: firstStep - 1 + warmupSteps(cfg.steps - firstStep + 1),
      trainStart: performance.now(),
    };
    const replicas = paramSlots(laidOut.buffers);
    this.stepping = 'stepping';
    let ahead: Promise<PostedStep | undefined> = Promise.resolve(undefined);
    for (let step = firstStep; step <= cfg.steps; step++) {
      this.stepInFlight = step;
      if ((step - 1) % cfg.stepsPerEpoch === 0)
        hooks.onEvent?.({ type: 'epoch', epoch: Math.floor((step - 1) / cfg.stepsPerEpoch) + 1, step });
      const t0 = performance.now();
      const postedAhead = await ahead;
      const waitFrom = performance.now();
      const current = postedAhead ?? (await this.loadedAndPosted(step, loading));
      if (!postedAhead) result.loadWaitTotal += current.loadedAt - waitFrom;
      result.stepStarts.push(t0);
      // Step s+1's inputs go into the other slot (step s-1's, finished) while step s trains; posted ahead, step s
      // was posted once step s-1 had ended, which started loading them then.
      if (step < cfg.steps && !postedAhead) {
        loading = laidOut.load(step + 1);
        loading.catch(() => {});
      }
      ahead = this.postAhead(step, loading, laidOut.groups);
      ahead.catch(() => {}); // awaited at the next step
      const results = await current.done;
      const ended = performance.now();
      const next = await ahead; // step s+1 posted (or not); a load slower than step s is waited for here
      if (next) result.loadWaitTotal += Math.max(0, next.loadedAt - ended); // the inputs' wait alone (several hosts: not the verdict's)
      if (next && step + 1 < cfg.steps) {
        loading = laidOut.load(step + 2);
        loading.catch(() => {});
      } // step s's slot is free now
      this.recordStep(step, results, t0, result);
      if (hooks.onStepApplied || this.replicaCheck.due(step)) await this.applied(laidOut.groups, step);
      hooks.onStepApplied?.(step, replicas, laidOut.layout);
      if (this.replicaCheck.due(step)) await this.replicaCheck.afterApplied(step, replicas);
      const stopping = await this.stopAfter(step, next !== undefined);
      const disarmGrace = () => {
        clearTimeout(this.graceTimer);
        this.stepping = 'after';
      };
      if (this.checkpointDue(step, stopping)) await this.checkpoint(laidOut, step, stopping ? disarmGrace : undefined);
      if (stopping) disarmGrace();
      if (stopping && step < cfg.steps) {
        result.lastStep = step;
        result.stoppedAt = step;
        hooks.onEvent?.({ type: 'stopped', step });
        break;
      }
    }
    this.stepping = 'after';
    clearTimeout(this.graceTimer);
    return result;
  }

  /** Step `step` posted to every device, once its inputs (`loading`) are loaded. */
  private async loadedAndPosted(step: number, loading: Promise<void>): Promise<PostedStep> {
    await this.withinStallTimeout(loading, step);
    return { ...this.postStep(step), loadedAt: performance.now() };
  }

  private postStep(step: number): Omit<PostedStep, 'loadedAt'> {
    // The first step waits on the comm threads' start (joining the communicator, the step-0 broadcast): setup's watchdog.
    const done = this.replies.expect('stepDone', step, step === this.firstStep ? this.setupWatchdogMs() : undefined);
    for (const a of this.actors) a.postCompute({ type: 'step', step });
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
    groups: ParameterGroup[],
  ): Promise<PostedStep | undefined> {
    const { cfg } = this;
    if (step >= cfg.steps || this.hooks.onStepApplied || this.replicaCheck.due(step) || this.checkpointDue(step, false))
      return undefined;
    await this.withinStallTimeout(loading, step + 1);
    const loadedAt = performance.now();
    if (this.failure) return undefined;
    if (this.world?.channel ? await this.agreedOnceApplied(groups, step) : this.stopWanted()) return undefined;
    return { ...this.postStep(step + 1), loadedAt };
  }

  private stopWanted(): boolean {
    return this.hooks.shouldStop?.() === true || this.stopRequest?.requested !== undefined;
  }

  /** Whether a checkpoint is written after `step` (every checkpointEvery steps, and at a stop before the last step). */
  private checkpointDue(step: number, stopping: boolean): boolean {
    const { cfg } = this;
    return (
      (this.store !== undefined || this.sendsHeads()) &&
      ((cfg.checkpointEvery && step % cfg.checkpointEvery === 0) || (stopping && step < cfg.steps))
    );
  }

  /** Step `step`'s replies: the loss checked, the ledger, the history and the monitor. */
  private recordStep(step: number, results: Reply<'stepDone'>[], t0: number, result: StepLoopResult): void {
    const { cfg } = this;
    this.checkLoss(step, results);
    this.ledger.stepDone(step, results);
    const loss = results.reduce((s, r) => s + r.loss, 0) / results.length;
    // This process's devices' samples (the whole global batch on one host; several hosts: host 0's monitor sees the world's).
    const correct = results.reduce((s, r) => s + r.correct, 0);
    const accuracy = correct / (cfg.perDevice * cfg.topology.localDevices);
    // The period: since the previous step was recorded (the first: since its loop iteration began), so that what the
    // loop does between steps (a checkpoint, the hosts' stop agreement, a replica check) counts, as it does in the wall time.
    const now = performance.now();
    const stepMs = now - (result.lastRecordedAt ?? t0);
    result.lastRecordedAt = now;
    const computeMs = results.map(r => r.computeMs);
    result.computeTotal += Math.max(...computeMs);
    if (step > result.warmup) result.steadyCompute += Math.max(...computeMs);
    result.history.push({ step, loss, accuracy });
    const numTensors = results.map(r => r.numTensors);
    this.monitor.step(
      { step, losses: results.map(r => r.loss), correct, stepMs, computeMs, numTensors },
      { step, loss, accuracy, stepMs, samplesPerSecond: cfg.batch / (stepMs / 1000), computeMs, numTensors },
    );
  }

  /** A non-finite loss: onNan 'error' fails the run naming the step and every such device; skip-step warns (every update of the step is skipped). */
  private checkLoss(step: number, results: { device: number; nonFiniteLoss?: number }[]): void {
    const bad = results.filter(r => r.nonFiniteLoss !== undefined);
    if (bad.length === 0) return;
    const where = bad.map(r => `device ${r.device} (${r.nonFiniteLoss})`).join(', ');
    if (this.cfg.onNan === 'error') {
      throw new TandemError(
        'NON_FINITE',
        `the loss is not finite in step ${step} on ${where}: the step was stopped before any gradient was ` +
          "handed over, so no parameter changed; lower the learning rate, check the inputs and the model's output for an overflow, or use onNan: 'skip-step'" +
          optimizerNaNHint(this.cfg.optimizer),
        { device: bad[0].device, step, phase: 'forward' },
      );
    }
    this.hooks.onEvent?.({
      type: 'warning',
      step,
      message: `the loss is not finite on ${where}: every update of step ${step} is skipped`,
    });
  }

  /** The error of an aborted run, once every thread ended and the last completed step is checkpointed. */
  private async abortedError(cause: 'request' | 'grace'): Promise<TandemError> {
    const why =
      cause === 'grace'
        ? `step ${this.stepInFlight} did not reach its stop checkpoint within stopGraceMs (${this.cfg.stopGraceMs} ms) of the stop request`
        : `on request during step ${this.stepInFlight}`;
    const saved = await this.checkpointLastCompleted().catch(
      (err: unknown) => `writing its checkpoint failed: ${(err as Error).message}`,
    );
    return new TandemError('ABORTED', `run aborted: ${why}; ${saved}`);
  }

  /** After an abort, every thread ended: the last completed step checkpointed (abort-checkpoint.ts); says what was done. */
  private async checkpointLastCompleted(): Promise<string> {
    const { laidOut, store } = this;
    const latest = this.ledger.lastCheckpoint ? `; the latest checkpoint is ${this.ledger.lastCheckpoint}` : '';
    if (!store)
      return checkpointDirOf(this.cfg)
        ? 'no checkpoint: training had not started'
        : 'no checkpoint (no checkpointDir or out)';
    const outcome = await writeAbortCheckpoint({
      cfg: this.cfg,
      store,
      control: this.control,
      laidOut,
      firstStep: this.firstStep,
      lastCheckpoint: this.ledger.lastCheckpoint,
      stateOnThreads: this.method.localState
        ? 'local heads'
        : laidOut && laidOut.stateTotal > 0
          ? 'non-trainable weights'
          : this.cfg.commHook
            ? `communication hook state (${this.cfg.commHook.name})`
            : undefined,
    });
    switch (outcome.kind) {
      case 'written':
        this.ledger.checkpointWritten(outcome.path);
        this.hooks.onEvent?.({ type: 'checkpoint', step: outcome.step, path: outcome.path });
        return `checkpoint of step ${outcome.step}, the last step every device completed: ${outcome.path}`;
      case 'already':
        return `the last completed step is ${outcome.step}, checkpointed: ${outcome.path}`;
      case 'none':
        return `no checkpoint: ${outcome.reason}${latest}`;
      default: {
        const never: never = outcome;
        throw new Error(`unknown outcome ${JSON.stringify(never)}`);
      }
    }
  }

  /** Phase 5: every device finishes (the export device exports its model); every comm report is in. */
  private async finish(laidOut: LaidOut, firstStep: number, lastStep: number): Promise<FinishedReport[]> {
    const { cfg } = this;
    const exporter = this.method.exportDevice(cfg);
    const finished = this.replies.expect('finished');
    for (const a of this.actors) {
      a.postCompute({
        type: 'finish',
        lastStep,
        exportModel: a.identity.rank === exporter.device && (cfg.out !== undefined || exporter.always),
      });
    }
    const fin = await finished;
    await this.ledger.allExchangesReported((lastStep - firstStep + 1) * laidOut.groups.length, lastStep);
    this.control.stop(); // comm threads still waiting for a later step (after a stop) leave now
    return fin;
  }

  private fail(err: TandemError): void {
    if (this.failure) return;
    if (err.code === 'PEER_LOST') {
      // A rank that lost its peer usually hears of it before the peer's own error (the cause) arrives: wait a moment for it.
      this.peerLost ??= setTimeout(() => this.failNow(err), PEER_LOST_GRACE_MS);
      return;
    }
    this.failNow(err);
  }

  private failNow(err: TandemError): void {
    if (this.failure) return;
    clearTimeout(this.peerLost);
    this.failure = err;
    this.control.abort();
    this.rejectRun?.(err);
  }

  private onCompute(msg: FromCompute): void {
    if (msg.type === 'error') {
      this.fail(deviceError('compute', msg.device, msg.step, msg.phase, msg.error));
      return;
    }
    if (msg.type === 'stepDone') this.ledger.recordSpans(msg.spans);
    this.replies.deliver(msg);
  }

  private onComm(msg: FromComm): void {
    switch (msg.type) {
      case 'error':
        if (msg.error.code === 'ABORTED' && this.failure) return;
        this.fail(deviceError('comm', msg.device, msg.step, msg.phase, msg.error));
        return;
      case 'exchanged':
        this.ledger.exchanged(msg);
        return;
      case 'hookState':
        this.hookSlots?.deliver(msg.device, msg.arrays);
        return;
      case 'stopped':
        return;
      default: {
        const never: never = msg;
        throw new Error(`unknown comm message ${JSON.stringify(never)}`);
      }
    }
  }

  /** `promise` (a step's loading), or a STALLED failure naming the loader's device if it takes longer than the watchdog allows. */
  private async withinStallTimeout<T>(promise: Promise<T>, step: number): Promise<T> {
    let cancel = () => {};
    const timeout = new Promise<never>((_, reject) => {
      // This process's running time (runningTimeout): a host stopped for a while (SIGSTOP) is not its loader's fault.
      cancel = runningTimeout(this.cfg.stallTimeoutMs, () => {
        const d = [...(this.loader?.pending ?? [])][0] ?? -1;
        reject(
          new TandemError(
            'STALLED',
            `device ${d} stopped responding at step ${step} in phase load (data loader: no result for ` +
              `${(this.cfg.stallTimeoutMs / 1000).toFixed(1)} s; raise stallTimeoutMs if loading is legitimately this slow)`,
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
   * Which thread stopped: threads that wait bump their heartbeat every wait slice; one whose
   * heartbeat stands still while it is busy (not idle) is hung. Several hosts: a busy thread still beating waits on
   * another host, which is slow, not dead (a checkpoint write, a warm-up): its own wait ends by itself (PEER_LOST, or
   * STALLED naming the host after twice stallTimeoutMs), so look again until then, or until the reply came (none then).
   * Falls back to the first silent device.
   */
  private async nameHungThread(silent: number[], unanswered: () => boolean): Promise<TandemError | undefined> {
    const patience = Date.now() + (this.cfg.topology.processes > 1 ? peerWaitMs(this.cfg.stallTimeoutMs) : 0);
    for (;;) {
      const look = await this.lookForHungThread();
      if (!unanswered()) return undefined;
      if (look.hung) return look.hung;
      if (!look.waiting || this.failure || Date.now() >= patience) break;
    }
    const d = silent[0] ?? 0;
    const { phase, step } = this.control.phaseOf(d - globalRank(this.cfg.topology, 0));
    return new TandemError(
      'STALLED',
      `device ${d} sent no report for ${(this.cfg.stallTimeoutMs / 1000).toFixed(1)} s at step ${step} in phase ${phase} ` +
        `(silent: device ${silent.join(', ')}; raise stallTimeoutMs if a step is legitimately this slow)`,
      { device: d, step, phase },
    );
  }

  /** One look at the heartbeats (over a few wait slices): a busy thread that stood still, and whether a busy one beat. */
  private async lookForHungThread(): Promise<{ hung?: TandemError; waiting: boolean }> {
    const sides = ['compute', 'comm'] as const;
    const before = this.actors.map(a => sides.map(s => this.control.heartbeat(a.identity.local, s)));
    await new Promise(r => setTimeout(r, 6 * WAIT_SLICE_MS));
    let waiting = false;
    for (const [i, a] of this.actors.entries()) {
      for (const [j, side] of sides.entries()) {
        const { phase, step } = this.control.phaseOf(a.identity.local, side);
        if (phase === 'idle' || phase === 'done') continue;
        if (this.control.heartbeat(a.identity.local, side) !== before[i][j]) {
          waiting = true;
          continue;
        }
        return {
          waiting,
          hung: new TandemError(
            'STALLED',
            `device ${a.identity.rank} stopped responding at step ${step} in phase ${phase} (${side} thread: no sign of life for ` +
              `${(this.cfg.stallTimeoutMs / 1000).toFixed(1)} s; raise stallTimeoutMs if a step is legitimately this slow)`,
            { device: a.identity.rank, step, phase },
          ),
        };
      }
    }
    return { waiting };
  }
}
