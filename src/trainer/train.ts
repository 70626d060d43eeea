/**
 * `train(config)`: the main-thread side of a run. Validates the config before
 * any thread starts, spawns one DeviceActor per device, lays out shared
 * memory once the replicas report their variables, drives the steps
 * (loading step s+1 while step s trains), and ends every thread whether the
 * run succeeds or fails. The first failure of any thread rejects the run with
 * the device, step and phase.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { resolveConfig, type ResolvedConfig, type TrainConfig } from '../config.js';
import { TandemError } from '../errors.js';
import { ControlBlock, WAIT_SLICE_MS } from '../actors/control-block.js';
import { DeviceActor, deviceError } from '../actors/device-actor.js';
import { allocateModelBuffers, paramSlots, type SharedBuffers } from '../actors/shared-buffers.js';
import type { FromComm, FromCompute, ModelArtifactsData, WeightShape } from '../actors/protocol.js';
import { allocateInputBuffers, ShardLoadError, type ShardLoader } from '../data/shard-loader.js';
import { sampleSize } from '../data/dataset.js';
import { layoutParameters, type ParameterLayout } from '../model/parameter-layout.js';
import { optimizerStateSlots } from '../optim/flat-optimizer.js';
import { exchangeGroups, MAX_GROUPS, type StrategySpec } from '../pipeline/strategy.js';
import { Subject } from 'rxjs';
import type { Span } from '../monitor/span.js';
import type { RunEvent } from '../monitor/run-event.js';
import { timelineSvg } from '../monitor/timeline-picture.js';
import { writeChromeTrace } from '../monitor/chrome-trace.js';
import { chooseStrategy, type AutoChoice } from '../profiling/choose-strategy.js';
import { allocatePartialFc } from '../classifier/partial-fc.js';
import { createLoader } from './create-loader.js';
import { writeCheckpoint, type HeadState } from '../checkpoint/checkpoint-file.js';
import { checkpointDirOf, loadResume, restoreShared, takeCheckpoint } from '../checkpoint/run-checkpoints.js';
import { classifierResult, evaluateHeldOut } from '../classifier/classifier-result.js';
import { writeModelFiles } from './model-files.js';
import type { StepMetrics, TrainHooks, TrainSummary, TrainingHandle } from './run-types.js';
export type { StepMetrics, TrainHooks, TrainSummary, TrainingHandle } from './run-types.js';

export async function train(config: TrainConfig, hooks: TrainHooks = {}): Promise<TrainSummary> {
  let auto: AutoChoice | undefined;
  if (config.strategy === 'auto') {
    await resolveConfig(config); // bad input fails before profiling starts a thread
    auto = await chooseStrategy(config);
    hooks.onAutoChoice?.(auto);
    hooks.onEvent?.({ type: 'auto', strategy: auto.strategy, splitLayer: auto.splitLayer, reason: auto.reason });
    config = { ...config, strategy: auto.strategy, splitLayer: auto.splitLayer };
  }
  const resolved = await resolveConfig(config);
  const autoNote = auto && { strategy: auto.strategy, splitLayer: auto.splitLayer, reason: auto.reason };
  return new TrainingRun(resolved, (config.strategy ?? 'sequential') as StrategySpec, hooks, autoNote).run();
}


/**
 * Starts a run and returns its streams at once.
 *
 * @example
 * const run = startTraining({ model: 'alexnet-mini', strategy: 'two-group', link: '1gbps' });
 * run.timeline$.pipe(filter(s => s.kind === 'exchange')).subscribe(s => console.log(s.device, s.name, s.end - s.start));
 * const summary = await run.done;
 */
export function startTraining(config: TrainConfig, hooks: TrainHooks = {}): TrainingHandle {
  const timeline$ = new Subject<Span>();
  const metrics$ = new Subject<StepMetrics>();
  const events$ = new Subject<RunEvent>();
  let stopRequested = false;
  const done = (async () => {
    return train(config, {
      ...hooks,
      shouldStop: () => stopRequested || hooks.shouldStop?.() === true,
      onSpans: spans => { for (const s of spans) timeline$.next(s); hooks.onSpans?.(spans); },
      onStep: m => { metrics$.next(m); hooks.onStep?.(m); },
      onEvent: e => { events$.next(e); hooks.onEvent?.(e); },
    });
  })();
  done.then(() => { timeline$.complete(); metrics$.complete(); events$.complete(); },
    err => { timeline$.error(err); metrics$.error(err); events$.error(err); });
  done.catch(() => {}); // the caller handles `done`; the streams carry the error too
  return { timeline$: timeline$.asObservable(), metrics$: metrics$.asObservable(), events$: events$.asObservable(), done, stop: () => { stopRequested = true; } };
}

/** The library's front door: `start(config)` = `startTraining(config)`. */
export function start(config: TrainConfig, hooks: TrainHooks = {}): TrainingHandle {
  return startTraining(config, hooks);
}

type Waiter = { need: number; got: FromCompute[]; resolve: (m: FromCompute[]) => void };

class TrainingRun {
  private readonly control: ControlBlock;
  private readonly controlBuffer: SharedArrayBuffer;
  private readonly actors: DeviceActor[] = [];
  private loader?: ShardLoader;
  private failure?: TandemError;
  private rejectRun?: (err: TandemError) => void;
  private readonly waiters = new Map<string, Waiter>();
  private readonly commStats = { exchangeMs: 0, updateMs: 0, count: 0 };
  private lastCheckpoint?: string;
  private stoppedAt?: number;
  /** onNan 'skip-step': the (step, group) updates skipped, and the first offending variable per step. */
  private readonly skipped: { step: number; group: number; variable?: string }[] = [];
  private readonly nonFinite = new Map<number, string>();
  /** What the collectives carried in step 1, per device message (float ranges of the shared layout). */
  private readonly carried: { start: number; end: number }[] = [];
  /** 'exchanged' reports received per device, and who waits for a count of them (see `commReports`). */
  private readonly exchangedBy: number[];
  private exchangedWaiter?: () => void;

  private readonly spans: Span[] = [];

  constructor(private readonly cfg: ResolvedConfig, private readonly strategy: StrategySpec, private readonly hooks: TrainHooks,
    private readonly auto?: TrainSummary['auto']) {
    this.exchangedBy = new Array<number>(cfg.devices).fill(0);
    const groupCount = MAX_GROUPS; // control words for as many groups as any strategy may use
    this.controlBuffer = new SharedArrayBuffer(ControlBlock.byteLength(cfg.devices, groupCount));
    this.control = new ControlBlock(this.controlBuffer, cfg.devices, groupCount, cfg.stallTimeoutMs);
    for (let d = 0; d < cfg.devices; d++) {
      for (let g = 0; g < groupCount; g++) { // sequence words start "before step 0"
        this.control.markGradsReady(d, g, -1);
        this.control.markApplied(d, g, -1);
      }
      this.control.setPhase(d, 'setup', 0, 'compute');
      this.control.setPhase(d, 'setup', 0, 'comm');
    }
  }

  async run(): Promise<TrainSummary> {
    const failed = new Promise<never>((_, reject) => { this.rejectRun = reject; });
    failed.catch(() => {});
    try {
      return await Promise.race([this.drive(), failed]);
    } catch (err) {
      throw this.failure ?? err;
    } finally {
      this.control.abort();
      await Promise.all(this.actors.map(a => a.close()));
      await this.loader?.close();
    }
  }

  private fail(err: TandemError): void {
    if (this.failure) return;
    this.failure = err;
    this.control.abort();
    this.rejectRun?.(err);
  }

  private onCompute(msg: FromCompute): void {
    if (msg.type === 'error') {
      this.fail(deviceError('compute', msg.device, msg.step, msg.phase, msg.error));
      return;
    }
    if (msg.type === 'stepDone') this.recordSpans(msg.spans);
    const key = msg.type === 'stepDone' ? `stepDone:${msg.step}` : msg.type;
    const w = this.waiters.get(key);
    if (!w) return;
    w.got.push(msg);
    if (w.got.length === w.need) { this.waiters.delete(key); w.resolve(w.got); }
  }

  private onComm(msg: FromComm): void {
    switch (msg.type) {
      case 'error':
        if (msg.error.code === 'ABORTED' && this.failure) return;
        this.fail(deviceError('comm', msg.device, msg.step, msg.phase, msg.error));
        return;
      case 'exchanged':
        this.exchangedBy[msg.device]++;
        this.exchangedWaiter?.();
        this.recordSpans(msg.spans);
        this.commStats.exchangeMs += msg.exchangeMs;
        this.commStats.updateMs += msg.updateMs;
        this.commStats.count++;
        if (msg.step === 1) this.carried.push(msg.carried);
        if (msg.skipped && msg.device === 0) {
          this.skipped.push({ step: msg.step, group: msg.group });
          this.hooks.onEvent?.({ type: 'warning', step: msg.step, message: `update of group ${msg.group} skipped: non-finite averaged gradient` });
        }
        return;
      case 'stopped':
        return;
      default: { const never: never = msg; throw new Error(`unknown comm message ${JSON.stringify(never)}`); }
    }
  }

  private recordSpans(spans: Span[]): void {
    if ((this.cfg.trace || this.cfg.out) && this.spans.length < 500_000) this.spans.push(...spans);
    this.hooks.onSpans?.(spans);
  }

  /** `promise` (a step's loading), or a STALLED failure naming the loader's device if it takes longer than the watchdog allows. */
  private async withinStallTimeout<T>(promise: Promise<T>, step: number): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const d = [...(this.loader?.pending ?? [])][0] ?? -1;
        reject(new TandemError('STALLED', `device ${d} stopped responding at step ${step} in phase load (data loader: no result for ` +
          `${(this.cfg.stallTimeoutMs / 1000).toFixed(1)} s; raise stallTimeoutMs if loading is legitimately this slow)`, { device: d, step, phase: 'load' }));
      }, this.cfg.stallTimeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([promise, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Which thread stopped: threads that wait bump their heartbeat every wait slice; one whose
   * heartbeat stands still while it is busy (not idle) is hung. Falls back to the first silent device.
   */
  private async nameHungThread(silent: number[]): Promise<TandemError> {
    const sides = ['compute', 'comm'] as const;
    const before = this.actors.map(a => sides.map(s => this.control.heartbeat(a.device, s)));
    await new Promise(r => setTimeout(r, 6 * WAIT_SLICE_MS));
    for (const a of this.actors) {
      for (const [i, side] of sides.entries()) {
        const { phase, step } = this.control.phaseOf(a.device, side);
        if (phase === 'idle' || phase === 'done' || this.control.heartbeat(a.device, side) !== before[a.device][i]) continue;
        return new TandemError('STALLED', `device ${a.device} stopped responding at step ${step} in phase ${phase} (${side} thread: no sign of life for ` +
          `${(this.cfg.stallTimeoutMs / 1000).toFixed(1)} s; raise stallTimeoutMs if a step is legitimately this slow)`, { device: a.device, step, phase });
      }
    }
    const d = silent[0] ?? 0;
    const { phase, step } = this.control.phaseOf(d);
    return new TandemError('STALLED', `device ${d} sent no report for ${(this.cfg.stallTimeoutMs / 1000).toFixed(1)} s at step ${step} in phase ${phase} ` +
      `(silent: device ${silent.join(', ')}; raise stallTimeoutMs if a step is legitimately this slow)`, { device: d, step, phase });
  }

  /**
   * Resolves when every device's comm thread has reported `need` exchanges. The comm thread marks a
   * group applied (which lets compute finish) before its report is posted, and reports travel on another
   * port than compute's, so the last step's reports (its spans, its timings) can arrive after `finished`.
   */
  private commReports(need: number, lastStep: number): Promise<void> {
    const complete = () => this.exchangedBy.every(n => n >= need);
    if (complete()) return Promise.resolve();
    return new Promise(resolve => {
      const timer = setTimeout(() => {
        const d = Math.max(0, this.exchangedBy.findIndex(n => n < need));
        this.fail(new TandemError('STALLED', `device ${d}'s comm thread reported ${this.exchangedBy[d]} of ${need} exchanges ` +
          `${(this.cfg.stallTimeoutMs / 1000).toFixed(1)} s after training finished (raise stallTimeoutMs if the link is legitimately this slow)`,
          { device: d, step: lastStep, phase: 'exchange' }));
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

  /** Resolves when every device sent a message of `key`. Register before posting. */
  private expectAll(key: string): Promise<FromCompute[]> {
    return new Promise(resolve => {
      const waiter: Waiter = { need: this.cfg.devices, got: [], resolve: msgs => { clearTimeout(timer); resolve(msgs); } };
      // Watchdog: a device that stops responding is named here, where it is known who is silent.
      const timer = setTimeout(() => {
        const silent = this.actors.map(a => a.device).filter(d => !waiter.got.some(m => (m as { device: number }).device === d));
        void this.nameHungThread(silent).then(err => this.fail(err));
      }, this.cfg.stallTimeoutMs);
      timer.unref();
      this.waiters.set(key, waiter);
    });
  }

  private async drive(): Promise<TrainSummary> {
    const cfg = this.cfg;
    const started = performance.now();
    const built = this.expectAll('built');
    for (let d = 0; d < cfg.devices; d++) {
      const actor = new DeviceActor(d, this.control, {
        onCompute: m => this.onCompute(m),
        onComm: m => this.onComm(m),
        onFailure: e => this.fail(e),
      });
      this.actors.push(actor);
      actor.postCompute({ type: 'init', device: d, config: cfg, control: this.controlBuffer, groupCount: MAX_GROUPS });
    }
    const reports = (await built) as (FromCompute & { type: 'built' })[];
    const weights = reports.find(r => r.device === 0)!.weights;
    const layout = layoutParameters(weights);
    for (const r of reports) {
      if (JSON.stringify(r.weights.map(w => w.shape)) !== JSON.stringify(weights.map(w => w.shape))) {
        throw new TandemError('BAD_CONFIG', `device ${r.device} built a model with different variables than device 0; the model factory must be deterministic in shape`);
      }
    }
    const groups = exchangeGroups(this.strategy, layout, cfg.strategyOptions);
    const input = allocateInputBuffers(cfg.devices, cfg.perDevice, sampleSize(cfg.sampleShape));
    const buffers: SharedBuffers = {
      control: this.controlBuffer,
      ...allocateModelBuffers(cfg.devices, layout.total, optimizerStateSlots(cfg.optimizer)),
      ...input,
    };
    if (cfg.method === 'partial-fc') buffers.partialFc = allocatePartialFc(cfg.devices, cfg.batch, cfg.classifier!.embedding);
    this.loader = await createLoader(cfg, input);
    const load = (step: number) => this.loader!.fill(step).catch((err: unknown) => {
      const device = err instanceof ShardLoadError ? err.device : -1;
      throw new TandemError('DATA_FAILED', `device ${device} failed at step ${step} in phase load (data loader): ${(err as Error).message}`,
        { device, step, phase: 'load' }, { cause: err });
    });
    const resume = cfg.resume ? await loadResume(cfg, weights) : undefined;
    const firstStep = (resume?.step ?? 0) + 1;
    this.hooks.onEvent?.({ type: 'started', devices: cfg.devices, backend: cfg.backend, method: cfg.method, strategy: cfg.strategy, steps: cfg.steps, firstStep, stepsPerEpoch: cfg.stepsPerEpoch });
    let loading = load(firstStep);
    loading.catch(() => {}); // awaited below; a failure must not be unhandled meanwhile

    const initialised = this.expectAll('initialised');
    for (const a of this.actors) a.postCompute({ type: 'buffers', buffers, groups });
    await initialised;
    if (resume) {
      restoreShared(buffers, resume);
      if (resume.heads) {
        const restored = this.expectAll('headRestored');
        for (const a of this.actors) a.postCompute({ type: 'restoreHead', head: resume.heads[a.device] });
        await restored;
      }
    }
    for (const a of this.actors) a.startComm({ type: 'start', device: a.device, config: cfg, control: this.controlBuffer, buffers, groups, firstStep });
    this.hooks.onEvent?.({ type: 'ready', parameters: layout.total, groups: groups.length });
    const checkpointDir = checkpointDirOf(cfg);
    const checkpoint = async (step: number) => {
      await Promise.all(this.actors.flatMap(a => groups.map((_, g) => this.control.waitAppliedAsync(a.device, g, step))));
      let heads: HeadState[] | undefined;
      if (cfg.classifier) {
        const snaps = this.expectAll('headSnapshot');
        for (const a of this.actors) a.postCompute({ type: 'snapshotHead' });
        heads = ((await snaps) as (FromCompute & { type: 'headSnapshot' })[]).sort((a, b) => a.device - b.device).map(m => m.head!);
      }
      this.lastCheckpoint = await writeCheckpoint(checkpointDir!, takeCheckpoint(cfg, step, weights, buffers, heads));
      this.hooks.onEvent?.({ type: 'checkpoint', step, path: this.lastCheckpoint });
    };
    let lastStep = cfg.steps;

    const history: TrainSummary['history'] = [];
    let computeTotal = 0, loadWaitTotal = 0, steadyCompute = 0;
    const stepStarts: number[] = [];
    // Steady-state figures leave out the first steps (engine warm-up, JIT).
    const warmup = firstStep - 1 + Math.min(3, Math.floor((cfg.steps - firstStep + 1) / 5));
    const trainStart = performance.now();
    const replicas = paramSlots(buffers);
    for (let step = firstStep; step <= cfg.steps; step++) {
      if ((step - 1) % cfg.stepsPerEpoch === 0) this.hooks.onEvent?.({ type: 'epoch', epoch: Math.floor((step - 1) / cfg.stepsPerEpoch) + 1, step });
      const t0 = performance.now();
      await this.withinStallTimeout(loading, step);
      loadWaitTotal += performance.now() - t0;
      stepStarts.push(t0);
      const done = this.expectAll(`stepDone:${step}`);
      for (const a of this.actors) a.postCompute({ type: 'step', step });
      // Step s+1's inputs go into the other slot (step s-1's, finished) while step s trains.
      if (step < cfg.steps) { loading = load(step + 1); loading.catch(() => {}); }
      const results = (await done) as (FromCompute & { type: 'stepDone' })[];
      results.sort((a, b) => a.device - b.device);
      const offender = results.find(r => r.nonFinite);
      if (offender) this.nonFinite.set(step, `${offender.nonFinite} on device ${offender.device}`);
      const loss = results.reduce((s, r) => s + r.loss, 0) / results.length;
      const accuracy = results.reduce((s, r) => s + r.correct, 0) / cfg.batch;
      const stepMs = performance.now() - t0;
      const computeMs = results.map(r => r.computeMs);
      computeTotal += Math.max(...computeMs);
      if (step > warmup) steadyCompute += Math.max(...computeMs);
      history.push({ step, loss, accuracy });
      this.hooks.onStep?.({ step, loss, accuracy, stepMs, samplesPerSecond: cfg.batch / (stepMs / 1000), computeMs, numTensors: results.map(r => r.numTensors) });
      if (this.hooks.onStepApplied) {
        await Promise.all(this.actors.flatMap(a => groups.map((_, g) => this.control.waitAppliedAsync(a.device, g, step))));
        this.hooks.onStepApplied(step, replicas, layout);
      }
      const stopping = this.hooks.shouldStop?.() === true;
      if (checkpointDir && ((cfg.checkpointEvery && step % cfg.checkpointEvery === 0) || (stopping && step < cfg.steps))) await checkpoint(step);
      if (stopping && step < cfg.steps) { lastStep = step; this.stoppedAt = step; this.hooks.onEvent?.({ type: 'stopped', step }); break; }
    }
    const finished = this.expectAll('finished');
    for (const a of this.actors) a.postCompute({ type: 'finish', lastStep, exportModel: a.device === (cfg.classifier?.exportDevice ?? 0) && (cfg.out !== undefined || cfg.method !== 'data-parallel' || cfg.trainSize < cfg.datasetSize) });
    const fin = (await finished) as (FromCompute & { type: 'finished' })[];
    await this.commReports((lastStep - firstStep + 1) * groups.length, lastStep);
    this.control.stop(); // comm threads still waiting for a later step (after a stop) leave now
    const trainEnd = performance.now();
    const trainSeconds = (trainEnd - trainStart) / 1000;
    const ranSteps = lastStep - firstStep + 1;
    const steadySteps = lastStep - warmup;
    const last = history[history.length - 1];
    const exportDevice = cfg.classifier?.exportDevice ?? 0;
    const artifacts = fin.find(f => f.device === exportDevice)?.artifacts;
    const summary: TrainSummary = {
      config: withoutFault(cfg),
      steps: lastStep,
      firstStep,
      stoppedAt: this.stoppedAt,
      checkpointPath: this.lastCheckpoint,
      finalLoss: last.loss,
      finalAccuracy: last.accuracy,
      samplesPerSecond: (ranSteps * cfg.batch) / trainSeconds,
      wallSeconds: (performance.now() - started) / 1000,
      meanStepMs: (trainSeconds * 1000) / ranSteps,
      steadyStepMs: (trainEnd - stepStarts[warmup]) / steadySteps,
      timings: {
        steadyComputeMs: steadyCompute / steadySteps,
        meanComputeMs: computeTotal / ranSteps,
        meanExchangeMs: this.commStats.exchangeMs / Math.max(1, this.commStats.count),
        meanUpdateMs: this.commStats.updateMs / Math.max(1, this.commStats.count),
        meanLoadWaitMs: loadWaitTotal / ranSteps,
      },
      parameters: layout.total,
      strategy: { name: cfg.strategy, groups: groups.map(g => ({ name: g.name, parameters: g.end - g.start })) },
      auto: this.auto,
      skippedUpdates: this.skipped.map(sk => ({ ...sk, variable: this.nonFinite.get(sk.step) })),
      link: cfg.link ? { emulated: true, label: cfg.link.label, bitsPerSecond: cfg.link.bandwidth, latencyMs: cfg.link.latencyMs } : undefined,
      history,
      weights: modelOrderWeights(weights, layout, replicas[0]),
    };
    if (cfg.classifier) {
      summary.classifier = await classifierResult(cfg, layout, this.carried, fin, artifacts!);
    } else if (cfg.trainSize < cfg.datasetSize) {
      const r = await evaluateHeldOut({ backend: cfg.backend, extractor: artifacts!, data: cfg.data, from: cfg.trainSize, to: cfg.datasetSize,
        classes: cfg.classes, embedding: cfg.classes, head: 'linear', maxSamples: cfg.evalSamples });
      summary.heldOut = { samples: r.samples, accuracy: r.classifierAccuracy };
    }
    if (cfg.out) await this.writeOutputs(cfg.out, summary, artifacts);
    if (cfg.out && summary.classifier?.fullClassifier) {
      summary.classifier.classifierPath = await writeModelFiles(path.join(cfg.out, 'classifier'), summary.classifier.fullClassifier);
    }
    if (cfg.trace) summary.tracePath = await writeChromeTrace(cfg.trace, this.spans, { strategy: cfg.strategy, link: summary.link });
    if (cfg.out) {
      // The picture of the last steps: enough to see the schedule, few enough to read it.
      const recent = this.spans.filter(sp => sp.step > lastStep - 3);
      summary.timelinePath = path.join(cfg.out, 'timeline.svg');
      await writeFile(summary.timelinePath, timelineSvg(recent, `tandem: ${cfg.model.source}, ${cfg.devices} devices, ${cfg.strategy}` +
        `${cfg.link ? `, link ${cfg.link.label} (emulated)` : ''}; steps ${Math.max(firstStep, lastStep - 2)}-${lastStep}`));
      if (!cfg.trace) summary.tracePath = await writeChromeTrace(path.join(cfg.out, 'trace.json'), this.spans, { strategy: cfg.strategy, link: summary.link });
    }
    this.hooks.onEvent?.({ type: 'finished', steps: lastStep, modelPath: summary.modelPath, tracePath: summary.tracePath, timelinePath: summary.timelinePath });
    return summary;
  }

  private async writeOutputs(dir: string, summary: TrainSummary, artifacts?: ModelArtifactsData): Promise<void> {
    await mkdir(dir, { recursive: true });
    if (artifacts) summary.modelPath = await writeModelFiles(dir, artifacts);
    const { weights, ...rest } = summary;
    void weights;
    if (rest.classifier) rest.classifier = { ...rest.classifier, fullClassifier: undefined };
    await writeFile(path.join(dir, 'summary.json'), JSON.stringify(rest, null, 2));
  }
}

function withoutFault(cfg: ResolvedConfig): Omit<ResolvedConfig, 'faultInjection'> {
  const { faultInjection, ...rest } = cfg;
  void faultInjection;
  return rest;
}

function modelOrderWeights(weights: WeightShape[], layout: ParameterLayout, slot: Float32Array): TrainSummary['weights'] {
  const out: TrainSummary['weights'] = weights.map(w => ({ name: w.name, shape: w.shape, values: new Float32Array(0) }));
  for (const v of layout.variables) out[v.modelIndex].values = slot.slice(v.offset, v.offset + v.size);
  return out;
}
