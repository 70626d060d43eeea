/**
 * One device's compute side, as one object: its tfjs engine, the model replica, the method's part of the device (loss,
 * local head), forward and backward (backward-pass.ts), and the compute half of the gradient pipeline. The compute
 * worker owns one and forwards its mailbox to it; every reply goes out through `send`.
 *
 * On an engine without synchronous reads (webgpu) every read is awaited: a gradient's read starts when backward
 * reaches it and it is handed over when the read returns (async-reads.ts), so exchange still overlaps the rest of
 * backward, which runs on the device meanwhile; parameters and inputs are copied out of the shared buffers into plain
 * arrays before an upload (replica-model.ts). The synchronous engines keep the synchronous path, unchanged.
 */
import { scheduledArithmetic } from '../optim/lr-schedule.js';
import type { ComputeConfig } from './config-slices.js';
import * as tf from '#tfjs';
import { Subject, tap } from '#rxjs';
import { serializeError } from '../errors.js';
import { engineStartOptions, startBackend } from '../engine/backend.js';
import { getEngine } from '../engine/engine-registry.js';
import { buildTrainingModel } from '../model/resolve-model.js';
import { readFlat, readFlatAsync, writeFlat } from '../model/flat-weights.js';
import { seedRandomLayers } from '../model/seeded-random-layers.js';
import { layoutParameters, weightShapes, type ParameterGroup } from '../model/parameter-layout.js';
import { inputSlotIndex, INPUT_SLOTS } from '../data/input-slots.js';
import { completeGroups } from '../pipeline/operators/complete-groups.js';
import { handOff } from '../pipeline/operators/hand-off.js';
import type { GradientReady } from '../pipeline/events.js';
import { wallNow, type Span } from '../monitor/span.js';
import { modelArtifacts } from './model-files.js';
import { openCollective } from '../collectives/transport-registry.js';
import type { RankHandle } from '../collectives/transport.js';
import { getMethod } from '../methods/method-registry.js';
import { BackwardPass, type PassHost } from './backward-pass.js';
import { paramsMirror } from './params-mirror.js';
import { firstNonFinite } from '../engine/non-finite.js';
import { runStepPasses } from './step-passes.js';
import { deviceShare } from './device-share.js';
import type { LayersModel, LayerVariable } from '../engine/tfjs-types.js';
import type { HeadState } from '../checkpoint/checkpoint-file.js';
import { probeEnter } from '../plugins/step-probes.js';
import { gateModel, type ForwardGate } from './forward-gate.js';
import { ControlBlock, firstStepWaitMs, threadWaitMs, type Phase } from '../pipeline/control-block.js';
import { gradSlots, modelStateSlots, paramSlots, type SharedBuffers } from './shared-buffers.js';
import {
  batchNormLayers,
  copyVariables,
  inputsOf,
  readState,
  setUpBatchNorm,
  writeState,
  writeVariable,
  type Attached,
  type Built,
} from './replica-model.js';
import type { DeviceIdentity, FromCompute } from './protocol.js';
import { peerWaitMs } from '../world/peer-wait.js';
import { layerSettings } from '../model/layer-settings.js';
import { DeviceReplays, replayable } from './step-replay.js';
import { InlineUpdate } from './inline-update.js';

type Send = (msg: FromCompute, transfer?: ArrayBuffer[]) => void;

export class DeviceReplica {
  readonly local: number;
  readonly rank: number;
  private readonly control: ControlBlock;
  private phase: Phase = 'setup';
  private step = 0; // until the first step (they count from 1), whose waits on the comm thread are setup's
  private spans: Span[] = [];
  private built?: Built;
  private attached?: Attached;
  /** Gradient-ready events of this device's backward passes: the compute half of the pipeline. */
  private readonly gradientReady$ = new Subject<GradientReady>();
  private groupBackwardStart = 0;
  /** batchNorm 'local': the moving statistics averaged over the devices after every step. */
  private averagedState?: LayerVariable[];
  /** This step's forward, in pieces between the group waits that blocked: where the current piece began, ms waited */
  private forwardFrom = 0;
  /** Gradient accumulation: the sum of the earlier micro-batches' gradients (layout order). */
  private gradientSum?: Float32Array;
  private forwardWaitedMs = 0;
  /** The engine's `dataSync()` works; false: every read is `await data()` (webgpu). */
  private readonly syncReads: boolean;
  private readonly replays = new DeviceReplays(); // the recorded step (step-replay.ts)

  constructor(
    device: DeviceIdentity,
    private readonly config: ComputeConfig,
    control: SharedArrayBuffer,
    groupCount: number,
    private readonly send: Send,
  ) {
    this.local = device.local;
    this.rank = device.rank;
    this.control = new ControlBlock(
      control,
      config.topology.localDevices,
      groupCount,
      threadWaitMs(config.stallTimeoutMs, config.topology.processes),
    );
    this.control.owner = { device: this.local, side: 'compute' };
    this.syncReads = getEngine(config.backend).capabilities.synchronousReads;
  }

  /** Where the device is, for an error report. */
  get where(): { device: number; step: number; phase: Phase } {
    return { device: this.rank, step: this.step, phase: this.phase };
  }

  private enter(p: Phase): void {
    this.phase = p;
    this.control.setPhase(this.local, p, this.step);
    probeEnter({ thread: 'compute', phase: p, device: this.rank, step: this.step }, this.config.pluginOptions);
  }

  private span(kind: Span['kind'], name: string, start: number, end: number, group?: number): void {
    this.spans.push({ device: this.rank, thread: 'compute', kind, name, step: this.step, group, start, end });
  }

  async build(): Promise<void> {
    const c = this.config;
    this.enter('setup');
    const engineDevice = await startBackend(tf, c.backend, engineStartOptions(c));
    const model = await buildTrainingModel(tf, c);
    const weights = weightShapes(model.trainableWeights);
    const state = weightShapes(model.nonTrainableWeights);
    this.built = { model, layout: layoutParameters(weights), random: seedRandomLayers(tf, model) };
    this.send({
      type: 'built',
      device: this.rank,
      weights,
      state,
      batchNormLayers: batchNormLayers(model),
      layers: layerSettings(model),
      numTensors: tf.memory().numTensors,
      engineDevice,
    });
  }

  async attach(buffers: SharedBuffers, groups: ParameterGroup[], handle?: RankHandle): Promise<void> {
    const { layout, model } = this.need();
    const c = this.config;
    const byModelIndex: number[] = [];
    layout.variables.forEach((v, i) => {
      byModelIndex[v.modelIndex] = i;
    });
    const collective =
      handle &&
      openCollective(handle, {
        timeoutMs: peerWaitMs(this.config.stallTimeoutMs),
        isAborted: () => this.control.aborted,
        heartbeat: () => this.control.beat(this.local, 'compute'),
      });
    this.averagedState = setUpBatchNorm(model, c, this.syncReads, collective);
    const arithmetic = scheduledArithmetic(getEngine(c.backend).arithmetic(), c.lrSchedule);
    const method = getMethod(c.method).createDevice({
      ...{ tf, cfg: c, device: this.rank, model, arithmetic },
      collective: collective?.blocking,
    });
    const params = paramSlots(buffers)[this.local];
    const device = { local: this.local, rank: this.rank };
    const source = { device, config: c, buffers, groups };
    this.attached = {
      inline: buffers.updatesOnCompute ? new InlineUpdate(source, this.control, arithmetic) : undefined,
      buffers,
      groups,
      params,
      grads: gradSlots(buffers)[this.local],
      modelState: modelStateSlots(buffers)[this.local],
      byModelIndex,
      collective,
      method,
      stateApplied: false,
      paramsBf16: paramsMirror(buffers, this.local, groups, params),
    };
    // Compute half of the pipeline: a group goes to the comm thread the moment it is complete.
    this.gradientReady$
      .pipe(
        completeGroups(groups),
        tap(gr => {
          // the group's share of backward, for the timeline
          this.span('backward', `backward group ${groups[gr.group].name}`, this.groupBackwardStart, gr.at, gr.group);
          this.groupBackwardStart = gr.at;
        }),
        handOff(this.control, this.local),
      )
      .subscribe({ error: err => this.send({ type: 'error', ...this.where, error: serializeError(err) }) });
    if (layout.total !== buffers.total)
      throw new Error(
        `device ${this.rank} built a model of ${layout.total} parameters, the run expects ${buffers.total}`,
      );
    if (this.local === 0) await this.shareInitialValues(this.attached);
    if (c.forwardWait === 'group')
      this.attached.gate = this.forwardGate(model, layout, groups, byModelIndex, this.attached.params);
    for (let gi = 0; gi < groups.length; gi++) this.control.markGradsReady(this.local, gi, 0);
    this.send({ type: 'initialised', device: this.rank });
  }

  /** Device 0's initial values are the run's, trainable or not: its comm thread broadcasts them (step 0). */
  private async shareInitialValues({ params, modelState }: Attached): Promise<void> {
    const { model, layout } = this.need();
    if (this.syncReads) {
      this.copyVariables(params, 'read');
      modelState.set(readState(model));
      return;
    }
    const values = await readFlatAsync(layout.variables.map(v => model.trainableWeights[v.modelIndex]));
    params.set(values); // layout order = transmission order, contiguous
    modelState.set(await readFlatAsync(model.nonTrainableWeights));
  }

  private need(): Built {
    if (!this.built) throw new Error('the device was asked to work before it built its model');
    return this.built;
  }

  private needAttached(): Built & Attached {
    if (!this.attached) throw new Error('the device was asked to train before it was given its buffers');
    return { ...this.need(), ...this.attached };
  }

  /** Copies between the model's variables and a flat slot (transmission order). */
  private copyVariables(slot: Float32Array, direction: 'read' | 'write'): void {
    const { model, layout } = this.need();
    copyVariables(model, layout, slot, direction, this.syncReads);
  }

  /** forwardWait 'group': layers wait for their groups' update and write their variables just before they run (a
   * wait that blocks ends the current forward span and is a 'wait' span of its own). */
  private forwardGate(
    model: LayersModel,
    layout: Built['layout'],
    groups: ParameterGroup[],
    byModelIndex: number[],
    params: Float32Array,
  ): ForwardGate {
    return gateModel(model, layout, groups, byModelIndex, {
      waitGroup: (g, step) => {
        if (this.control.applied(this.local, g) >= step) return false;
        this.control.waitApplied(
          this.local,
          g,
          step,
          `device ${this.rank}'s comm thread to apply group ${groups[g].name} of step ${step}`,
        );
        return true;
      },
      writeVariable: i => writeVariable(model, layout, params, i, this.syncReads),
      waited: (g, start, end, layer) => {
        if (start > this.forwardFrom) this.span('forward', 'forward', this.forwardFrom, start);
        this.span('wait', `wait ${groups[g].name} (before ${layer})`, start, end, g);
        this.forwardFrom = end;
        this.forwardWaitedMs += end - start;
      },
    });
  }

  private waitForUpdate(ofStep: number): void {
    const what = `device ${this.rank}'s comm thread to apply the update of step ${ofStep}`;
    const { groups } = this.needAttached();
    for (let gi = 0; gi < groups.length; gi++) this.control.waitApplied(this.local, gi, ofStep, what);
  }

  async snapshot(step: number): Promise<void> {
    const { method, model } = this.needAttached();
    // The non-trainable weights are the same on every device at a checkpoint: the process's first device sends them
    const state =
      this.local !== 0 ? undefined : this.syncReads ? readState(model) : await readFlatAsync(model.nonTrainableWeights);
    this.send({ type: 'headSnapshot', device: this.rank, step, head: method.snapshot(), state });
  }

  restore(head: HeadState): void {
    this.needAttached().method.restore(head);
    this.send({ type: 'headRestored', device: this.rank });
  }

  async trainStep(s: number): Promise<void> {
    const { model, layout, buffers, grads, byModelIndex, method, random, gate, paramsBf16 } = this.needAttached();
    const cfg = this.config;
    if (this.step === 0) this.control.setupWaitsThrough(s, firstStepWaitMs(cfg.stallTimeoutMs, cfg.topology.processes));
    this.step = s;
    this.spans = [];
    const t0 = wallNow();
    this.enter('load');
    this.beforeForward(s);
    const inputs = inputsOf(buffers, inputSlotIndex(this.local, s % INPUT_SLOTS), cfg);
    const t1 = wallNow();
    this.span('load', 'load', t0, t1);
    this.forwardFrom = t1;
    this.forwardWaitedMs = 0;
    this.enter('forward');
    random.at(cfg.seed, this.rank, s);
    const { syncReads, rank } = this;
    const { rows, samples, weight } = deviceShare(cfg, s, rank); // a partial batch: fewer rows, weighted
    if (cfg.accumulate > 1) this.gradientSum ??= new Float32Array(layout.total);
    const replay = this.replays.of(tf, this.attached!, replayable(cfg));
    const passInputs = { cfg, rank, step: s, model, layout, byModelIndex, grads, method, gate, syncReads, weight };
    const run = await runStepPasses({
      ...{ cfg, ...inputs, syncReads, sum: this.gradientSum, rows, model, scope: getEngine(cfg.backend).stepScope },
      mirror: paramsBf16?.(s),
      pass: micro => new BackwardPass({ ...passInputs, micro, replay }, this.passHost()),
      between: () => this.nextMicroBatch(),
    });
    const { localGrads, nonFinite, nonFiniteLoss } = run;
    // a placeholder row counts for nothing
    const [loss, correct, metrics] = samples > 0 ? [run.loss, run.correct, run.metrics] : [0, 0, run.metrics?.fill(0)];
    // Local state is never exchanged; a non-finite local gradient under skip-step skips the local update too.
    const skipLocal =
      nonFiniteLoss !== undefined || (nonFinite !== undefined && localGrads.some(g => firstNonFinite(g) >= 0));
    if (localGrads.length > 0 && !skipLocal) method.applyLocal(localGrads, s);
    if (this.averagedState) await this.averageState(this.averagedState);
    const t2 = wallNow();
    const { inline } = this.attached!;
    if (inline) this.enter('update'); // a failure in it is named as the update's
    const exchanged = await inline?.run(s);
    this.enter('idle');
    this.send({
      type: 'stepDone',
      device: this.rank,
      step: s,
      ...{ loss, correct, metrics, replayed: run.replayed === true, exchanged },
      count: samples,
      computeMs: t2 - t1 - this.forwardWaitedMs,
      loadMs: t1 - t0,
      numTensors: tf.memory().numTensors,
      spans: this.spans,
      nonFinite,
      nonFiniteLoss,
    });
  }

  /**
   * Step `s`'s parameters: forward waits for each group of step s-1 (forwardWait 'group'), or the whole update of
   * step s-1 is waited for and written now. The first step waits for the whole step-0 broadcast: the non-trainable
   * weights it carries are written at once.
   */
  private beforeForward(s: number): void {
    const attached = this.attached!;
    const { model, params, gate } = this.needAttached();
    if (gate && attached.stateApplied) {
      gate.arm(s - 1); // forward waits for each group of step s-1 just before the first layer using it
    } else {
      this.waitForUpdate(s - 1);
      this.copyVariables(params, 'write');
    }
    if (!attached.stateApplied) {
      writeState(model, this.syncReads ? attached.modelState : new Float32Array(attached.modelState));
      attached.stateApplied = true;
    }
  }

  /** Gradient accumulation: a micro-batch's backward has ended (a span of its own), the next one's forward begins. */
  private nextMicroBatch(): void {
    const now = wallNow();
    this.span('backward', 'backward micro-batch', this.groupBackwardStart, now);
    this.enter('forward');
    this.forwardFrom = now;
  }

  /** How a step's backward pass reaches this device: the phase, the timeline, the compute half of the pipeline. */
  private passHost(): PassHost {
    return {
      backwardStarted: at => {
        this.groupBackwardStart = at;
        this.span('forward', 'forward', this.forwardFrom, at);
        this.enter('backward');
      },
      span: (kind, name, start, end) => this.span(kind, name, start, end),
      ready: event => this.gradientReady$.next(event),
    };
  }

  /** The mean of `vars` over every device, written back: afterwards every device holds the same bits. */
  private async averageState(vars: LayerVariable[]): Promise<void> {
    const flat = this.syncReads ? readFlat(vars) : await readFlatAsync(vars);
    await this.needAttached().collective!.allReduce(flat, 0, flat.length, 'mean');
    writeFlat(tf, vars, flat);
  }

  async finish(lastStep: number, exportModel: boolean): Promise<void> {
    const { model, params, method, collective } = this.needAttached();
    this.step = lastStep;
    this.enter('export');
    this.waitForUpdate(lastStep);
    this.copyVariables(params, 'write');
    const artifacts = exportModel ? await modelArtifacts(tf, model) : undefined;
    const worldHeads = method.worldHeads?.();
    this.enter('done');
    if (collective && !this.control.aborted) await collective.barrier(); // as comm: no close while a peer reads
    collective?.close();
    const state = this.syncReads ? readState(model) : await readFlatAsync(model.nonTrainableWeights);
    const finished = {
      type: 'finished',
      device: this.rank,
      artifacts,
      head: method.finalValues(),
      worldHeads,
    } as const;
    this.send({ ...finished, state, numTensors: tf.memory().numTensors }, artifacts ? [artifacts.weightData] : []);
  }
}
