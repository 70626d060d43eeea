/**
 * One device's compute side, as one object: its tfjs engine, the model
 * replica, the method's part of the device (loss, local head), forward and
 * backward, and the compute half of the gradient pipeline. The compute
 * worker owns one and forwards its mailbox to it; every reply goes out
 * through `send`.
 *
 * On an engine without synchronous reads (webgpu) every read is awaited: a
 * gradient's read starts when backward reaches it and it is handed over when
 * the read returns (async-reads.ts), so exchange still overlaps the rest of
 * backward, which runs on the device meanwhile; parameters and inputs are
 * copied out of the shared buffers into plain arrays before an upload. The
 * synchronous engines keep the synchronous path, unchanged.
 */
import * as tf from '@tensorflow/tfjs';
import { Subject, tap } from 'rxjs';
import { TandemError, serializeError } from '../errors.js';
import { startBackend } from '../engine/backend.js';
import { getEngine } from '../engine/engine-registry.js';
import { buildTrainingModel } from '../model/resolve-model.js';
import { withRegularization } from '../model/output-loss.js';
import { assignWeight, readFlat, readFlatAsync, writeFlat } from '../model/flat-weights.js';
import { OrderedReads } from '../engine/async-reads.js';
import { seedRandomLayers, type RandomLayerSeeds } from '../model/seeded-random-layers.js';
import { batchNormalizationLayers, trainBatchNormalization } from '../model/sync-batch-norm.js';
import { layoutParameters, type ParameterGroup, type ParameterLayout } from '../model/parameter-layout.js';
import { inputSlotIndex, INPUT_SLOTS } from '../data/shard-loader.js';
import { backwardWithGradientReady, backwardWithGradientReadyAsync } from '../engine/gradient-tape.js';
import { completeGroups } from '../pipeline/operators/complete-groups.js';
import { handOff } from '../pipeline/operators/hand-off.js';
import type { GradientReady } from '../pipeline/events.js';
import { wallNow, type Span } from '../monitor/span.js';
import { modelArtifacts } from './model-files.js';
import { openCollective } from '../collectives/transport-registry.js';
import type { Collective } from '../collectives/collective.js';
import type { RankHandle } from '../collectives/transport.js';
import { getMethod } from '../methods/method-registry.js';
import type { DeviceMethod, StepLoss } from '../methods/training-method.js';
import { isRegressionLoss, type ResolvedConfig } from '../config-types.js';
import type { LayersModel, LayerVariable, Tensor, Variable } from '../engine/tfjs-types.js';
import type { HeadState } from '../checkpoint/checkpoint-file.js';
import { injectFault } from './fault-injection.js';
import { ForwardGate, wrapLayerCalls } from './forward-gate.js';
import { ControlBlock, threadWaitMs, type Phase } from '../pipeline/control-block.js';
import { gradSlots, modelStateSlots, paramSlots, type SharedBuffers } from './shared-buffers.js';
import type { DeviceIdentity, FromCompute } from './protocol.js';
import { peerWaitMs } from '../world/peer-wait.js';

type Send = (msg: FromCompute, transfer?: ArrayBuffer[]) => void;

/** The replica after `build`. */
interface Built {
  model: LayersModel;
  layout: ParameterLayout;
  /** The model's random layers, drawing from (seed, rank, step). */
  random: RandomLayerSeeds;
}

/** After `attach`: where the shared buffers are, and the method's part of the device. */
interface Attached {
  buffers: SharedBuffers;
  groups: ParameterGroup[];
  params: Float32Array;
  grads: Float32Array;
  /** layout index of each model variable. */
  byModelIndex: number[];
  collective?: Collective;
  method: DeviceMethod;
  /** This device's slot of the non-trainable weights (device 0's values after the step-0 broadcast). */
  modelState: Float32Array;
  /** Whether the broadcast non-trainable weights were written into the model (once, before the first step). */
  stateApplied: boolean;
  /** forwardWait 'group': the per-group waits inside forward. */
  gate?: ForwardGate;
}

export class DeviceReplica {
  readonly local: number;
  readonly rank: number;
  private readonly control: ControlBlock;
  private phase: Phase = 'setup';
  private step = 0;
  private spans: Span[] = [];
  private built?: Built;
  private attached?: Attached;
  /** Gradient-ready events of this device's backward passes: the compute half of the pipeline. */
  private readonly gradientReady$ = new Subject<GradientReady>();
  private groupBackwardStart = 0;
  /** batchNorm 'local': the moving statistics averaged over the devices after every step. */
  private averagedState?: LayerVariable[];
  /** This step's forward, in pieces between the group waits that blocked: where the current piece began, and the ms waited. */
  private forwardFrom = 0;
  private forwardWaitedMs = 0;
  /** The engine's `dataSync()` works; false: every read is `await data()` (webgpu). */
  private readonly syncReads: boolean;

  constructor(
    device: DeviceIdentity,
    private readonly config: ResolvedConfig,
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
    const fi = this.config.faultInjection;
    if (
      fi &&
      fi.device === this.rank &&
      fi.step === this.step &&
      fi.phase === p &&
      fi.kind !== 'nan' &&
      fi.kind !== 'perturb'
    )
      injectFault(fi.kind, p);
  }

  private span(kind: Span['kind'], name: string, start: number, end: number, group?: number): void {
    this.spans.push({ device: this.rank, thread: 'compute', kind, name, step: this.step, group, start, end });
  }

  async build(): Promise<void> {
    const c = this.config;
    this.enter('setup');
    const engineDevice = await startBackend(tf, c.backend, { nativeThreads: c.nativeThreads });
    const model = await buildTrainingModel(tf, c);
    const weights = model.trainableWeights.map(w => ({ name: w.originalName, shape: [...w.shape] as number[] }));
    const state = model.nonTrainableWeights.map(w => ({ name: w.originalName, shape: [...w.shape] as number[] }));
    this.built = { model, layout: layoutParameters(weights), random: seedRandomLayers(tf, model) };
    this.send({
      type: 'built',
      device: this.rank,
      weights,
      state,
      batchNormLayers: batchNormLayers(model),
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
    const batchNorm = batchNormalizationLayers(model);
    const syncBatchNorm = collective && c.devices > 1 && c.batchNorm === 'sync';
    // tandem's BatchNormalization kernel reads its input on the host inside forward: synchronous engines only.
    // Elsewhere tfjs's own layer trains on the device, with this device's batch (local statistics).
    if (batchNorm.length > 0 && !this.syncReads && syncBatchNorm) throw asyncSyncBatchNormError(c.backend);
    if (batchNorm.length > 0 && this.syncReads)
      trainBatchNormalization(tf, model, syncBatchNorm ? collective.blocking : undefined);
    if (collective && batchNorm.length > 0 && c.devices > 1 && c.batchNorm === 'local')
      this.averagedState = movingStatistics(model);
    const method = getMethod(c.method).createDevice({
      tf,
      cfg: c,
      device: this.rank,
      model,
      arithmetic: getEngine(c.backend).arithmetic(),
      collective: collective?.blocking,
    });
    this.attached = {
      buffers,
      groups,
      params: paramSlots(buffers)[this.local],
      grads: gradSlots(buffers)[this.local],
      modelState: modelStateSlots(buffers)[this.local],
      byModelIndex,
      collective,
      method,
      stateApplied: false,
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
    // Device 0's initial values are the run's, trainable or not: its comm thread broadcasts them (step 0).
    if (this.local === 0 && this.syncReads) {
      this.copyVariables(this.attached.params, 'read');
      this.attached.modelState.set(readState(model));
    } else if (this.local === 0) {
      const values = await readFlatAsync(layout.variables.map(v => model.trainableWeights[v.modelIndex]));
      this.attached.params.set(values); // layout order = transmission order, contiguous
      this.attached.modelState.set(await readFlatAsync(model.nonTrainableWeights));
    }
    if (c.forwardWait === 'group')
      this.attached.gate = this.forwardGate(model, layout, groups, byModelIndex, this.attached.params);
    for (let gi = 0; gi < groups.length; gi++) this.control.markGradsReady(this.local, gi, 0);
    this.send({ type: 'initialised', device: this.rank });
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
    const { layout } = this.need();
    layout.variables.forEach((_, i) => {
      if (direction === 'read') this.readVariable(slot, i);
      else this.writeVariable(slot, i);
    });
  }

  private readVariable(slot: Float32Array, index: number): void {
    const { model, layout } = this.need();
    const spec = layout.variables[index];
    slot
      .subarray(spec.offset, spec.offset + spec.size)
      .set(model.trainableWeights[spec.modelIndex].read().dataSync() as Float32Array);
  }

  /** Sets layout variable `index` of the model from `slot`. */
  private writeVariable(slot: Float32Array, index: number): void {
    const { model, layout } = this.need();
    const spec = layout.variables[index];
    const values = slot.subarray(spec.offset, spec.offset + spec.size);
    // An asynchronous engine uploads later, from what it was given: a copy, never a view of the shared buffer.
    const t = tf.tensor(this.syncReads ? values : new Float32Array(values), spec.shape, 'float32');
    assignWeight(model.trainableWeights[spec.modelIndex], t);
    t.dispose();
  }

  /**
   * forwardWait 'group': every layer holding parameters waits for its groups' update and writes its variables just
   * before it runs; a wait that blocks ends the current forward span and is a 'wait' span of its own.
   */
  private forwardGate(
    model: LayersModel,
    layout: ParameterLayout,
    groups: ParameterGroup[],
    byModelIndex: number[],
    params: Float32Array,
  ): ForwardGate {
    let gate: ForwardGate | undefined;
    const owned = wrapLayerCalls(model, byModelIndex, () => gate!);
    gate = new ForwardGate(layout, groups, owned, {
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
      writeVariable: i => this.writeVariable(params, i),
      waited: (g, start, end, layer) => {
        if (start > this.forwardFrom) this.span('forward', 'forward', this.forwardFrom, start);
        this.span('wait', `wait ${groups[g].name} (before ${layer})`, start, end, g);
        this.forwardFrom = end;
        this.forwardWaitedMs += end - start;
      },
    });
    return gate;
  }

  private waitForUpdate(ofStep: number): void {
    const { groups } = this.needAttached();
    for (let gi = 0; gi < groups.length; gi++) {
      this.control.waitApplied(
        this.local,
        gi,
        ofStep,
        `device ${this.rank}'s comm thread to apply the update of step ${ofStep}`,
      );
    }
  }

  async snapshot(step: number): Promise<void> {
    const { method, model } = this.needAttached();
    // The non-trainable weights are the same on every device at a checkpoint: the first device of the process sends them.
    const state =
      this.local !== 0 ? undefined : this.syncReads ? readState(model) : await readFlatAsync(model.nonTrainableWeights);
    this.send({ type: 'headSnapshot', device: this.rank, step, head: method.snapshot(), state });
  }

  restore(head: HeadState): void {
    this.needAttached().method.restore(head);
    this.send({ type: 'headRestored', device: this.rank });
  }

  async trainStep(s: number): Promise<void> {
    const { model, layout, buffers, params, grads, byModelIndex, method, random, gate } = this.needAttached();
    const cfg = this.config;
    this.step = s;
    this.spans = [];
    const t0 = wallNow();
    this.enter('load');
    // The first step waits for the whole step-0 broadcast: the non-trainable weights it carries are written at once.
    if (gate && this.attached!.stateApplied) {
      gate.arm(s - 1); // forward waits for each group of step s-1 just before the first layer using it
    } else {
      this.waitForUpdate(s - 1);
      this.copyVariables(params, 'write');
    }
    if (!this.attached!.stateApplied) {
      writeState(model, this.syncReads ? this.attached!.modelState : new Float32Array(this.attached!.modelState));
      this.attached!.stateApplied = true;
    }
    const slot = inputSlotIndex(this.local, s % INPUT_SLOTS);
    const x = new Float32Array(buffers.inputs, slot * buffers.inputSlotSize * 4, buffers.inputSlotSize);
    const y = new Int32Array(buffers.labels, slot * buffers.labelSlotSize * 4, buffers.labelSlotSize);
    const targets = isRegressionLoss(cfg.loss)
      ? new Float32Array(buffers.labels, slot * buffers.labelSlotSize * 4, buffers.labelSlotSize)
      : undefined;
    const t1 = wallNow();
    this.span('load', 'load', t0, t1);
    this.forwardFrom = t1;
    this.forwardWaitedMs = 0;
    this.enter('forward');
    random.at(cfg.seed, this.rank, s);
    const copy = <T extends Float32Array | Int32Array>(a: T): T => (this.syncReads ? a : (a.slice() as T)); // slice: a plain ArrayBuffer
    const xs = tf.tensor(copy(x), [cfg.perDevice, ...cfg.sampleShape], 'float32');
    const ys = targets
      ? tf.tensor(copy(targets), [cfg.perDevice], 'float32')
      : tf.tensor(copy(y), [cfg.perDevice], 'int32');
    let backwardStart = 0;
    // Marks the start of backward: its gradient is the first one backward runs.
    const backwardMarker = tf.customGrad(((t: Tensor) => ({
      value: t.clone(),
      gradFunc: (dy: Tensor) => {
        backwardStart = wallNow();
        this.groupBackwardStart = backwardStart;
        this.span('forward', 'forward', this.forwardFrom, backwardStart);
        this.enter('backward');
        return dy;
      },
    })) as never) as (t: Tensor) => Tensor;
    const vars = model.trainableWeights.map(w => w.read() as Variable);
    const localVars = method.localVariables;
    let stepLoss: StepLoss | undefined;
    let localGrads: Float32Array[] = [];
    let nonFinite: string | undefined;
    let nonFiniteLoss: number | undefined;
    let lastReady = 0;
    const reads = this.syncReads ? undefined : new OrderedReads(tf);
    let lossValue = NaN;
    /** A variable's final gradient: checked, written to the shared layout, and its readiness announced. */
    const handOver = (modelIndex: number, values: Float32Array): void => {
      // A non-finite loss stops the step: nothing is handed over (onNan 'error': the main thread fails the run, naming
      // every such device), or NaN is (skip-step: every device then skips every group of the step). Backward still
      // runs to its end, so that collectives inside it (BatchNormalization sync, partial-fc) stay in step.
      if (nonFiniteLoss !== undefined && cfg.onNan === 'error') return;
      const local = modelIndex >= vars.length;
      const name = local ? localVars[modelIndex - vars.length].name : model.trainableWeights[modelIndex].originalName;
      const bad = nonFiniteLoss === undefined ? firstNonFinite(values) : -1;
      if (bad >= 0) {
        if (cfg.onNan === 'error') throw nonFiniteError(values[bad], name, bad, s);
        nonFinite ??= name; // skip-step: handed over; the comm side skips the group's update
      }
      if (nonFiniteLoss !== undefined) nonFinite ??= `the loss (${nonFiniteLoss})`;
      if (local) {
        localGrads[modelIndex - vars.length] = values.slice();
        return;
      }
      const spec = layout.variables[byModelIndex[modelIndex]];
      if (nonFiniteLoss === undefined) grads.set(values, spec.offset);
      else grads.fill(NaN, spec.offset, spec.offset + spec.size);
      const now = wallNow();
      if (lastReady === 0) lastReady = backwardStart;
      if (now > lastReady) this.span('backward', `backward ${spec.layer}`, lastReady, now);
      lastReady = now;
      this.gradientReady$.next({
        step: s,
        start: spec.offset,
        end: spec.offset + spec.size,
        layer: spec.layer,
        at: now,
      });
    };
    const forward = (): Tensor => {
      const modelOut = model.apply(xs, { training: true }) as Tensor;
      gate?.settle(); // every parameter current before the loss, the regularizers and backward
      const out = backwardMarker(modelOut);
      const fi = cfg.faultInjection;
      return fi?.kind === 'nan' && fi.device === this.rank && fi.step === s ? tf.mul(out, NaN) : out;
    };
    /** The loss backward differentiates: the method's, with the model's penalties; its value read (or queued) before any gradient. */
    const differentiated = (result: StepLoss): Tensor => {
      stepLoss = result;
      const total = withRegularization(tf, model, result.loss); // kernel/bias/activity penalties, as model.fit adds them
      if (reads) {
        // read first, so known before any gradient is handled
        const penalised = total !== result.loss && result.reportedLoss !== undefined;
        const decide = () => {
          nonFiniteLoss = [lossValue, result.reportedLoss ?? 0].find(v => !Number.isFinite(v));
        };
        reads.queue(total, v => {
          lossValue = v[0];
          if (!penalised) decide();
        });
        if (penalised)
          reads.queue(result.loss, v => {
            result.reportedLoss! += lossValue - v[0];
            decide();
          });
        return total;
      }
      if (total !== result.loss && result.reportedLoss !== undefined) {
        result.reportedLoss += total.dataSync()[0] - result.loss.dataSync()[0];
      }
      nonFiniteLoss = [total.dataSync()[0], result.reportedLoss ?? 0].find(v => !Number.isFinite(v));
      return total;
    };
    const onReady = (modelIndex: number, gradient: Tensor): void => {
      if (reads) reads.queue(gradient, values => handOver(modelIndex, values));
      else if (nonFiniteLoss === undefined || cfg.onNan !== 'error')
        handOver(modelIndex, gradient.dataSync() as Float32Array);
    };
    const value = reads
      ? // The method may await reads of the forward's output before its loss exists (partial-fc's host statistics).
        await backwardWithGradientReadyAsync(
          tf,
          async () => differentiated(await method.loss(forward(), ys, y, s)),
          [...vars, ...localVars],
          onReady,
        )
      : backwardWithGradientReady(
          tf,
          () => differentiated(synchronousLoss(method.loss(forward(), ys, y, s), cfg.method)),
          [...vars, ...localVars],
          onReady,
        );
    if (reads) await reads.done();
    const result = stepLoss!;
    const loss = result.reportedLoss ?? (reads ? lossValue : value.dataSync()[0]);
    const correct = typeof result.correct === 'number' ? result.correct : await result.correct;
    value.dispose();
    tf.dispose([xs, ys]);
    if (result.localGradients) localGrads = result.localGradients;
    // Local state is never exchanged; a non-finite local gradient under skip-step skips the local update too.
    const skipLocal =
      nonFiniteLoss !== undefined || (nonFinite !== undefined && localGrads.some(g => firstNonFinite(g) >= 0));
    if (localGrads.length > 0 && !skipLocal) method.applyLocal(localGrads, s);
    if (this.averagedState) await this.averageState(this.averagedState);
    const t2 = wallNow();
    this.enter('idle');
    this.send({
      type: 'stepDone',
      device: this.rank,
      step: s,
      loss,
      correct,
      count: cfg.perDevice,
      computeMs: t2 - t1 - this.forwardWaitedMs,
      loadMs: t1 - t0,
      numTensors: tf.memory().numTensors,
      spans: this.spans,
      nonFinite,
      nonFiniteLoss,
    });
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
    if (collective && !this.control.aborted) await collective.barrier(); // as the comm thread: no close while a peer still reads
    collective?.close();
    const state = this.syncReads ? readState(model) : await readFlatAsync(model.nonTrainableWeights);
    this.send(
      {
        type: 'finished',
        device: this.rank,
        artifacts,
        head: method.finalValues(),
        worldHeads,
        state,
        numTensors: tf.memory().numTensors,
      },
      artifacts ? [artifacts.weightData] : [],
    );
  }
}

/** The model's non-trainable weights, model order, as one flat array. */
function readState(model: LayersModel): Float32Array {
  return readFlat(model.nonTrainableWeights);
}

/** Sets the model's non-trainable weights from one flat array (model order). */
function writeState(model: LayersModel, flat: Float32Array): void {
  writeFlat(tf, model.nonTrainableWeights, flat);
}

/** Names of the BatchNormalization layers of `model`, nested models included. */
function batchNormLayers(model: LayersModel): string[] {
  return batchNormalizationLayers(model).map(l => l.name);
}

/** The moving statistics of the BatchNormalization layers of `model`. */
function movingStatistics(model: LayersModel): LayerVariable[] {
  return batchNormalizationLayers(model).flatMap(l => [l.movingMean, l.movingVariance] as unknown as LayerVariable[]);
}

/** Sync BatchNormalization reads activations on the host inside forward; an engine without synchronous reads cannot. */
function asyncSyncBatchNormError(backend: string): TandemError {
  return new TandemError(
    'BAD_CONFIG',
    `backend '${backend}' cannot read tensors synchronously, which batchNorm 'sync' needs inside forward ` +
      "(the statistics of the global batch); use --batch-norm local (each device's own batch, moving statistics averaged after every step), one device, " +
      'or a backend that reads synchronously (native, wasm, cpu)',
  );
}

/** A method's loss on an engine with synchronous reads: computed inside the synchronous forward, never awaited. */
function synchronousLoss(result: StepLoss | Promise<StepLoss>, method: string): StepLoss {
  if (result instanceof Promise)
    throw new Error(
      `--method ${method} returned its loss as a promise on an engine with synchronous reads; it must compute it synchronously there`,
    );
  return result;
}

function firstNonFinite(values: Float32Array): number {
  for (let i = 0; i < values.length; i++) if (!Number.isFinite(values[i])) return i;
  return -1;
}

/** `onNan: 'error'`: raised before the gradient is handed over, so before it can reach any parameter. */
function nonFiniteError(value: number, name: string, at: number, s: number): TandemError {
  return new TandemError(
    'NON_FINITE',
    `the gradient of ${name} has ${value} at element ${at} in step ${s} (the first non-finite gradient of ` +
      "this backward pass, output layer first); lower the learning rate, check the inputs, clip the loss, or use onNan: 'skip-step'",
  );
}
