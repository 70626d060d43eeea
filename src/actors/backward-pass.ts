/**
 * One training step's forward and backward on a device: the method's loss (with the model's penalties), every
 * gradient checked, written to the shared layout and announced the moment backward produces it (the compute half of
 * the pipeline takes it from there), and the step's loss and accuracy. On an engine without synchronous reads every
 * read is queued in order (async-reads.ts); the synchronous engines read at once.
 */
import * as tf from '#tfjs';
import type { ResolvedConfig } from '../config-types.js';
import { TandemError } from '../errors.js';
import { OrderedReads } from '../engine/async-reads.js';
import { copyFinite, firstNonFinite } from '../engine/non-finite.js';
import { hostFloats } from '../engine/host-floats.js';
import { backwardWithGradientReady, backwardWithGradientReadyAsync } from '../engine/gradient-tape.js';
import { probeForward } from '../plugins/step-probes.js';
import type { LayersModel, Tensor, Variable } from '../engine/tfjs-types.js';
import { withRegularization } from '../model/output-loss.js';
import type { ParameterLayout } from '../model/parameter-layout.js';
import type { GradientReady } from '../pipeline/events.js';
import { wallNow, type Span } from '../monitor/span.js';
import type { DeviceMethod, StepLoss } from '../methods/training-method.js';
import type { ForwardGate } from './forward-gate.js';
import type { PassMark, StepReplay } from './step-replay.js';
import { markRead, traceMark, type KernelTrace } from '../engine/kernel-trace.js';

/** What the pass tells its device: backward began, a span of the timeline, a gradient ready. */
export interface PassHost {
  /** Backward began at `at` (its first gradient runs): the forward span ends there, the phase is 'backward'. */
  backwardStarted(at: number): void;
  span(kind: Span['kind'], name: string, start: number, end: number): void;
  ready(event: GradientReady): void;
}

/** The device's parts one step uses. */
export interface PassInputs {
  cfg: Pick<ResolvedConfig, 'onNan' | 'pluginOptions' | 'method'>;
  /** The device's recorded step (step-replay.ts), when it may replay one. */
  replay?: StepReplay;
  rank: number;
  step: number;
  model: LayersModel;
  layout: ParameterLayout;
  /** layout index of each model variable. */
  byModelIndex: number[];
  /** This device's gradient slot (layout order). */
  grads: Float32Array;
  method: DeviceMethod;
  gate?: ForwardGate;
  syncReads: boolean;
  /** The factor on the method's loss: 1, or this device's weight in a partial batch (device-share.ts). */
  weight: number;
  /** Gradient accumulation: this pass is micro-batch `index` of `count`; `sum` holds the earlier ones' gradients. */
  micro?: MicroBatch;
}

/** One micro-batch of a step (accumulate > 1): the gradients are summed until the last, which hands over the mean. */
export interface MicroBatch {
  index: number;
  count: number;
  /** The layout's floats: the sum of the earlier micro-batches' gradients (written by the first). */
  sum: Float32Array;
  /** An earlier micro-batch's non-finite loss: this pass hands over as if its own loss were it. */
  nonFiniteLoss?: number;
}

/** The step's outcome, as the device reports it. */
export interface PassResult {
  loss: number;
  correct: number;
  /** The local variables' gradients (the method's own, when it computed them). */
  localGrads: Float32Array[];
  /** The metrics' sums (model/metric-values.ts), when the run computes metrics. */
  metrics?: number[];
  /** The first variable (or the loss) that was not finite, under skip-step. */
  nonFinite?: string;
  nonFiniteLoss?: number;
  /** The pass ran as the device's recorded kernels (step-replay.ts). */
  replayed?: boolean;
}

export class BackwardPass {
  private readonly vars: Variable[];
  private readonly localVars: Variable[];
  private readonly reads?: OrderedReads;
  private readonly marker: (t: Tensor) => Tensor;
  private stepLoss?: StepLoss;
  private localGrads: Float32Array[] = [];
  private nonFinite?: string;
  private nonFiniteLoss?: number;
  private lastReady = 0;
  private backwardStart = 0;
  private lossValue = NaN;

  constructor(
    private readonly x: PassInputs,
    private readonly host: PassHost,
  ) {
    this.vars = x.model.trainableWeights.map(w => w.read() as Variable);
    this.localVars = x.method.localVariables;
    this.reads = x.syncReads ? undefined : new OrderedReads(tf);
    // Marks the start of backward: its gradient is the first one backward runs.
    this.marker = tf.customGrad(((t: Tensor) => ({
      value: t.clone(),
      gradFunc: (dy: Tensor) => {
        traceMark<PassMark>({ kind: 'backwardStarted' });
        this.startBackward();
        return dy;
      },
    })) as never) as (t: Tensor) => Tensor;
  }

  /**
   * Forward and backward over inputs `xs` and targets `ys` (`labels`: the class labels, for the method): the device's
   * recorded step replayed where it has one, else through tfjs (recorded, where it may replay later).
   */
  async run(xs: Tensor, ys: Tensor, labels: Int32Array): Promise<PassResult> {
    const { replay, syncReads, micro, weight } = this.x;
    if (!replay || !syncReads || micro) return this.live(xs, ys, labels);
    const inputs = [xs, ys];
    // an uneven share's weight is a constant of the recording: a step of other rows or weight does not replay it
    const trace = replay.replayable(inputs, weight);
    if (trace) return this.replayed(replay, trace, inputs);
    const recording = replay.record([...this.vars, ...this.localVars], inputs, weight);
    if (!recording) return this.live(xs, ys, labels);
    let usable = false;
    try {
      const result = await this.live(xs, ys, labels);
      const s = this.stepLoss!;
      usable = s.reportedLoss === undefined && s.localGradients === undefined && typeof s.correct === 'number';
      usable &&= !(s.metrics instanceof Promise) && result.nonFinite === undefined && this.nonFiniteLoss === undefined;
      return result;
    } finally {
      replay.recorded(recording, usable);
    }
  }

  /** The step as its recording runs it: the same kernels, and the pass's part at each mark. */
  private replayed(replay: StepReplay, trace: KernelTrace<PassMark>, inputs: Tensor[]): PassResult {
    let correct = 0,
      metrics: number[] | undefined;
    replay.replay(trace, [...this.vars, ...this.localVars], inputs, {
      need: (indices, layer) => this.x.gate?.need(indices, layer),
      settle: () => this.x.gate?.settle(),
      backwardStarted: () => this.startBackward(),
      read: (name, values) => {
        if (name === 'total') this.lossRead(values[0]);
        else if (name === 'correct') correct = values[0];
        else if (name === 'metrics') metrics = Array.from(values);
        else throw new Error(`step replay: a read of '${name}' has no place in a pass`);
      },
      ready: (index, gradient) => this.readyValues(index, gradient),
      destination: index => this.slotOf(index),
    });
    const { lossValue: loss, localGrads, nonFinite, nonFiniteLoss } = this;
    return { loss, correct, metrics, localGrads, nonFinite, nonFiniteLoss, replayed: true };
  }

  private startBackward(): void {
    this.backwardStart = wallNow();
    this.host.backwardStarted(this.backwardStart);
  }

  private async live(xs: Tensor, ys: Tensor, labels: Int32Array): Promise<PassResult> {
    const { method, step, cfg } = this.x;
    const { reads } = this;
    const variables = [...this.vars, ...this.localVars];
    const onReady = (modelIndex: number, gradient: Tensor) => this.onReady(modelIndex, gradient);
    const value = reads
      ? // The method may await reads of the forward's output before its loss exists (partial-fc's host statistics).
        await backwardWithGradientReadyAsync(
          tf,
          async () => this.differentiated(await method.loss(this.forward(xs), ys, labels, step)),
          variables,
          onReady,
        )
      : backwardWithGradientReady(
          tf,
          () => this.differentiated(synchronousLoss(method.loss(this.forward(xs), ys, labels, step), cfg.method)),
          variables,
          onReady,
          index => this.slotOf(index),
        );
    if (reads) await reads.done();
    const result = this.stepLoss!;
    const loss = result.reportedLoss ?? this.lossValue;
    const correct = typeof result.correct === 'number' ? result.correct : await result.correct;
    const metrics = result.metrics instanceof Promise ? await result.metrics : result.metrics;
    value.dispose();
    const localGrads = result.localGradients ?? this.localGrads;
    return { loss, correct, metrics, localGrads, nonFinite: this.nonFinite, nonFiniteLoss: this.nonFiniteLoss };
  }

  private forward(xs: Tensor): Tensor {
    const { model, gate, cfg, rank, step } = this.x;
    const modelOut = model.apply(xs, { training: true }) as Tensor;
    gate?.settle(); // every parameter current before the loss, the regularizers and backward
    const out = this.marker(modelOut);
    return probeForward({ thread: 'compute', phase: 'forward', device: rank, step }, cfg.pluginOptions, out);
  }

  /**
   * The loss backward differentiates: the method's, with the model's penalties; its value read (or queued) before any
   * gradient. A partial batch's share weighs the method's loss (not the penalties): weight · loss + penalties, so that
   * every sample's gradient is scaled alike on every device (devices / r) and the exchange's mean is one engine's.
   */
  private differentiated(result: StepLoss): Tensor {
    this.stepLoss = result;
    // kernel/bias/activity penalties, as model.fit adds them
    const total = withRegularization(tf, this.x.model, result.loss);
    const { weight } = this.x;
    const backward = weight === 1 ? total : tf.sub(total, tf.mul(result.loss, 1 - weight));
    const { reads } = this;
    if (reads) {
      // read first, so known before any gradient is handled
      const penalised = total !== result.loss && result.reportedLoss !== undefined;
      const decide = () => {
        this.nonFiniteLoss =
          [this.lossValue, result.reportedLoss ?? 0].find(v => !Number.isFinite(v)) ?? this.x.micro?.nonFiniteLoss;
      };
      reads.queue(total, v => {
        this.lossValue = v[0];
        if (!penalised) decide();
      });
      if (penalised)
        reads.queue(result.loss, v => {
          result.reportedLoss! += this.lossValue - v[0];
          decide();
        });
      return backward;
    }
    if (total !== result.loss && result.reportedLoss !== undefined) {
      result.reportedLoss += total.dataSync()[0] - result.loss.dataSync()[0];
    }
    markRead('total', total);
    this.lossRead(total.dataSync()[0], result.reportedLoss);
    return backward;
  }

  /** The loss read (on a synchronous engine): a non-finite one (or a non-finite reported loss) is this step's. */
  private lossRead(value: number, reported?: number): void {
    this.lossValue = value;
    this.nonFiniteLoss = [value, reported ?? 0].find(v => !Number.isFinite(v)) ?? this.x.micro?.nonFiniteLoss;
  }

  private onReady(modelIndex: number, gradient: Tensor): void {
    if (this.reads) this.reads.queue(gradient, values => this.handOver(modelIndex, values));
    else {
      traceMark<PassMark>({ kind: 'ready', index: modelIndex }, [gradient]);
      this.readyValues(modelIndex, hostFloats(tf, gradient)); // read in place: handOver copies, keeps nothing
    }
  }

  private readyValues(modelIndex: number, values: Float32Array): void {
    if (this.nonFiniteLoss === undefined || this.x.cfg.onNan !== 'error') this.handOver(modelIndex, values);
  }

  /**
   * `vars[index]`'s place in the layout when its gradient takes the common path (a finite loss, no micro-batches, a
   * variable of the layout): handOver copies and checks it there in one call, and a kernel may write it there first.
   */
  private commonPlace(index: number) {
    const { layout, byModelIndex, micro } = this.x;
    if (this.nonFiniteLoss !== undefined || micro || index >= this.vars.length) return undefined;
    return layout.variables[byModelIndex[index]] as (typeof layout.variables)[number] | undefined;
  }

  /** The slot of the layout where `vars[index]`'s gradient goes on the common path, for its kernel to write. */
  private slotOf(index: number): Float32Array | undefined {
    const place = this.commonPlace(index);
    return place && this.x.grads.subarray(place.offset, place.offset + place.size);
  }

  /** A variable's final gradient: checked, written to the shared layout, and its readiness announced. */
  private handOver(modelIndex: number, values: Float32Array): void {
    const { cfg, model, layout, byModelIndex, grads, step } = this.x;
    const { nonFiniteLoss, vars } = this;
    // A non-finite loss stops the step: nothing is handed over (onNan 'error': the main thread fails the run, naming
    // every such device), or NaN is (skip-step: every device then skips every group of the step). Backward still
    // runs to its end, so that collectives inside it (BatchNormalization sync, partial-fc) stay in step.
    if (nonFiniteLoss !== undefined && cfg.onNan === 'error') return;
    const local = modelIndex >= vars.length;
    const spec = local ? undefined : layout.variables[byModelIndex[modelIndex]];
    const { micro } = this.x;
    // the common path: copied (or only checked, when its kernel wrote it there) in one call, before the decision
    // below; a failing step never reads the copy, and skip-step hands over the same values
    const place = this.commonPlace(modelIndex);
    const copied = place !== undefined;
    const bad = copied
      ? copyFinite(values, grads, place.offset)
      : nonFiniteLoss === undefined
        ? firstNonFinite(values)
        : -1;
    if (bad >= 0) {
      // named only here: the model's trainableWeights getter walks every layer (~0.1 ms a step when asked per weight)
      const name = local
        ? this.localVars[modelIndex - vars.length].name
        : model.trainableWeights[modelIndex].originalName;
      if (cfg.onNan === 'error') throw nonFiniteError(values[bad], name, bad, step);
      this.nonFinite ??= name; // skip-step: handed over; the comm side skips the group's update
    }
    if (nonFiniteLoss !== undefined) this.nonFinite ??= `the loss (${nonFiniteLoss})`;
    if (local) {
      this.localGrads[modelIndex - vars.length] = values.slice();
      return;
    }
    if (!spec) return;
    if (micro && micro.index < micro.count - 1) {
      // an earlier micro-batch: summed, nothing is ready until the last
      if (nonFiniteLoss === undefined) addInto(micro.sum, values, spec.offset, micro.index === 0);
      else micro.sum.fill(NaN, spec.offset, spec.offset + spec.size);
      return;
    }
    if (nonFiniteLoss !== undefined) grads.fill(NaN, spec.offset, spec.offset + spec.size);
    else if (micro) meanInto(grads, micro, values, spec.offset);
    else if (!copied) grads.set(values, spec.offset);
    const now = wallNow();
    if (this.lastReady === 0) this.lastReady = this.backwardStart;
    if (now > this.lastReady) this.host.span('backward', `backward ${spec.layer}`, this.lastReady, now);
    this.lastReady = now;
    this.host.ready({ step, start: spec.offset, end: spec.offset + spec.size, layer: spec.layer, at: now });
  }
}

/** A method's loss on an engine with synchronous reads: computed inside the synchronous forward, never awaited. */
function synchronousLoss(result: StepLoss | Promise<StepLoss>, method: string): StepLoss {
  if (result instanceof Promise)
    throw new Error(
      `--method ${method} returned its loss as a promise on an engine with synchronous reads; ` +
        'it must compute it synchronously there',
    );
  return result;
}

/** sum[offset + i] = values[i] (`first`), else += values[i], in float32. */
function addInto(sum: Float32Array, values: Float32Array, offset: number, first: boolean): void {
  if (first) sum.set(values, offset);
  else for (let i = 0; i < values.length; i++) sum[offset + i] += values[i];
}

/** The last micro-batch: grads = (the earlier ones' sum + its own) / count, the mean gradient of the whole batch. */
function meanInto(grads: Float32Array, micro: MicroBatch, values: Float32Array, offset: number): void {
  const { sum, count } = micro;
  for (let i = 0; i < values.length; i++) grads[offset + i] = Math.fround(sum[offset + i] + values[i]) / count;
}

/** `onNan: 'error'`: raised before the gradient is handed over, so before it can reach any parameter. */
function nonFiniteError(value: number, name: string, at: number, s: number): TandemError {
  return new TandemError(
    'NON_FINITE',
    `the gradient of ${name} has ${value} at element ${at} in step ${s} (the first non-finite gradient of ` +
      'this backward pass, output layer first); lower the learning rate, check the inputs, clip the loss, ' +
      "or use onNan: 'skip-step'",
  );
}
