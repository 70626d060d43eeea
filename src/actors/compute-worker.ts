/**
 * Worker entry of a device's compute thread: its own tfjs engine, the model
 * replica, forward and backward. The only file of the compute side that
 * touches `parentPort`. Every failure goes back as data with device, step and
 * phase; the main thread rethrows it with that context.
 */
import { parentPort } from 'node:worker_threads';
import * as tf from '@tensorflow/tfjs';
import { serializeError, TandemError } from '../errors.js';
import { startBackend } from '../engine/backend.js';
import { flatArithmeticFor } from '../optim/flat-arithmetic.js';
import { buildTrainingModel, classificationLoss, outputsProbabilities } from '../model/resolve-model.js';
import { layoutParameters, type ParameterGroup, type ParameterLayout } from '../model/parameter-layout.js';
import { inputSlotIndex, INPUT_SLOTS } from '../data/shard-loader.js';
import { ControlBlock, type Phase } from './control-block.js';
import { gradSlots, paramSlots, type SharedBuffers } from './shared-buffers.js';
import type { FromCompute, ToCompute } from './protocol.js';
import type { ResolvedConfig } from '../config.js';
import type { LayersModel } from '../engine/tfjs-types.js';
import { Subject, tap } from 'rxjs';
import { backwardWithGradientReady } from '../engine/gradient-tape.js';
import { completeGroups } from '../pipeline/operators/complete-groups.js';
import { handOff } from '../pipeline/operators/hand-off.js';
import type { GradientReady } from '../pipeline/events.js';
import { wallNow, type Span } from '../monitor/span.js';
import { ClassifierHead } from '../classifier/classifier-head.js';
import { modelArtifacts } from '../trainer/model-files.js';
import { injectFault } from './fault-injection.js';
import { LabelPartition } from '../classifier/label-partition.js';
import { partialFcStep, type PartialFcContext } from '../classifier/partial-fc.js';

if (!parentPort) throw new Error('compute-worker must run as a worker thread');
const port = parentPort;

let device = -1;
let config: ResolvedConfig;
let control: ControlBlock;
let model: LayersModel;
let layout: ParameterLayout;
let buffers: SharedBuffers;
let groups: ParameterGroup[];
let params: Float32Array;
let grads: Float32Array;
let probabilities = false;
let head: ClassifierHead | undefined;
let partition: LabelPartition | undefined;
let phase: Phase = 'setup';
let step = 0;
let spans: Span[] = [];
let byModelIndex: number[] = [];
/** Gradient-ready events of this device's backward passes: the compute half of the pipeline. */
const gradientReady$ = new Subject<GradientReady>();
let groupBackwardStart = 0;

function span(kind: Span['kind'], name: string, start: number, end: number, group?: number): void {
  spans.push({ device, thread: 'compute', kind, name, step, group, start, end });
}

function send(msg: FromCompute, transfer: ArrayBuffer[] = []): void { port.postMessage(msg, transfer); }

function enter(p: Phase): void {
  phase = p;
  control?.setPhase(device, p, step);
  const fi = config?.faultInjection;
  if (fi && fi.device === device && fi.step === step && fi.phase === p && fi.kind !== 'nan') injectFault(fi.kind, p);
}

port.on('message', (msg: ToCompute) => {
  handle(msg).catch(err => {
    send({ type: 'error', device, step, phase, error: serializeError(err) });
  });
});

async function handle(msg: ToCompute): Promise<void> {
  switch (msg.type) {
    case 'init': return init(msg.device, msg.config, msg.control, msg.groupCount);
    case 'buffers': return attach(msg.buffers, msg.groups);
    case 'step': return trainStep(msg.step);
    case 'finish': return finish(msg.lastStep, msg.exportModel);
    case 'snapshotHead': return send({ type: 'headSnapshot', device, head: head?.snapshot() });
    case 'restoreHead': head!.restore(msg.head); return send({ type: 'headRestored', device });
    default: { const never: never = msg; throw new Error(`unknown message ${JSON.stringify(never)}`); }
  }
}

async function init(d: number, c: ResolvedConfig, controlBuffer: SharedArrayBuffer, groupCount: number): Promise<void> {
  device = d;
  config = c;
  control = new ControlBlock(controlBuffer, c.devices, groupCount, 2 * c.stallTimeoutMs);
  control.owner = { device: d, side: 'compute' };
  enter('setup');
  await startBackend(tf, c.backend, { nativeThreads: c.nativeThreads });
  model = await buildTrainingModel(tf, c);
  probabilities = outputsProbabilities(model);
  if (c.classifier) {
    partition = LabelPartition.fromShares(c.classes, c.classifier.partition);
    head = new ClassifierHead(tf, {
      kind: c.classifier.head, embedding: c.classifier.embedding, labels: partition.labels[d], totalClasses: c.classes,
      scale: c.classifier.scale, margin: c.classifier.margin, seed: c.seed,
    }, c.optimizer, flatArithmeticFor(c.backend));
  }
  const weights = model.trainableWeights.map(w => ({ name: w.originalName, shape: [...w.shape] as number[] }));
  layout = layoutParameters(weights);
  send({ type: 'built', device, weights, numTensors: tf.memory().numTensors });
}

function attach(b: SharedBuffers, g: ParameterGroup[]): void {
  buffers = b;
  groups = g;
  byModelIndex = [];
  layout.variables.forEach((v, i) => { byModelIndex[v.modelIndex] = i; });
  // Compute half of the pipeline: a group goes to the comm thread the moment it is complete.
  gradientReady$.pipe(
    completeGroups(groups),
    tap(gr => { // the group's share of backward, for the timeline
      span('backward', `backward group ${groups[gr.group].name}`, groupBackwardStart, gr.at, gr.group);
      groupBackwardStart = gr.at;
    }),
    handOff(control, device),
  ).subscribe({ error: err => send({ type: 'error', device, step, phase, error: serializeError(err) }) });
  params = paramSlots(b)[device];
  grads = gradSlots(b)[device];
  if (layout.total !== b.total) throw new Error(`device ${device} built a model of ${layout.total} parameters, the run expects ${b.total}`);
  // Device 0's initial values are the run's: its comm thread broadcasts them (step 0).
  if (device === 0) writeVariables(params, 'read');
  for (let gi = 0; gi < groups.length; gi++) control.markGradsReady(device, gi, 0);
  send({ type: 'initialised', device });
}

/** Copies between the model's variables and a flat slot (transmission order). */
function writeVariables(slot: Float32Array, direction: 'read' | 'write'): void {
  const vars = model.trainableWeights;
  for (const spec of layout.variables) {
    const v = vars[spec.modelIndex];
    const view = slot.subarray(spec.offset, spec.offset + spec.size);
    if (direction === 'read') {
      view.set(v.read().dataSync() as Float32Array);
    } else {
      const t = tf.tensor(view, spec.shape, 'float32');
      v.write(t);
      t.dispose();
    }
  }
}

function waitForUpdate(ofStep: number): void {
  for (let gi = 0; gi < groups.length; gi++) {
    control.waitApplied(device, gi, ofStep, `device ${device}'s comm thread to apply the update of step ${ofStep}`);
  }
}

async function trainStep(s: number): Promise<void> {
  step = s;
  spans = [];
  const t0 = wallNow();
  enter('load');
  waitForUpdate(s - 1);
  writeVariables(params, 'write');
  const slot = inputSlotIndex(device, s % INPUT_SLOTS);
  const x = new Float32Array(buffers.inputs, slot * buffers.inputSlotSize * 4, buffers.inputSlotSize);
  const y = new Int32Array(buffers.labels, slot * buffers.labelSlotSize * 4, buffers.labelSlotSize);
  const t1 = wallNow();
  span('load', 'load', t0, t1);
  enter('forward');
  const xs = tf.tensor(x, [config.perDevice, ...config.sampleShape], 'float32');
  const ys = tf.tensor(y, [config.perDevice], 'int32');
  let correct = 0;
  let backwardStart = 0;
  // Marks the start of backward: its gradient is the first one backward runs.
  const backwardMarker = tf.customGrad(((t: import('@tensorflow/tfjs').Tensor) => ({
    value: t.clone(),
    gradFunc: (dy: import('@tensorflow/tfjs').Tensor) => {
      backwardStart = wallNow();
      groupBackwardStart = backwardStart;
      span('forward', 'forward', t1, backwardStart);
      enter('backward');
      return dy;
    },
  })) as never) as (t: import('@tensorflow/tfjs').Tensor) => import('@tensorflow/tfjs').Tensor;
  const vars = model.trainableWeights.map(w => w.read() as import('@tensorflow/tfjs').Variable);
  // local-head: the head's variables join backward, their gradients stay here.
  const allVars = config.method === 'local-head' && head ? [...vars, ...head.vars] : vars;
  let headGrads: Float32Array[] = [];
  let partialFcLoss = NaN;
  let nonFinite: string | undefined;
  let lastReady = 0;
  const value = backwardWithGradientReady(tf, () => {
    let out = backwardMarker(model.apply(xs, { training: true }) as import('@tensorflow/tfjs').Tensor);
    const fi = config.faultInjection;
    if (fi?.kind === 'nan' && fi.device === device && fi.step === s) out = tf.mul(out, NaN);
    switch (config.method) {
      case 'data-parallel': {
        const { loss, correct: c } = classificationLoss(tf, out, ys, config.classes, probabilities);
        correct = c.dataSync()[0];
        c.dispose();
        return loss;
      }
      case 'local-head': {
        const { loss, correct: c } = classificationLoss(tf, head!.logits(out, ys), ys, head!.config.labels.length, false);
        correct = c.dataSync()[0];
        c.dispose();
        return loss;
      }
      case 'partial-fc': {
        const r = partialFcStep(partialFcContext(s), out);
        partialFcLoss = r.loss;
        correct = r.correct;
        headGrads = r.headGrads;
        return r.surrogate;
      }
      default: { const never: never = config.method; throw new Error(`unknown method ${String(never)}`); }
    }
  }, allVars, (modelIndex, gradient) => {
    const values = gradient.dataSync() as Float32Array;
    const name = modelIndex >= vars.length ? head!.vars[modelIndex - vars.length].name : model.trainableWeights[modelIndex].originalName;
    const bad = firstNonFinite(values);
    if (bad >= 0) {
      if (config.onNan === 'error') throw nonFiniteError(values[bad], name, bad, s);
      nonFinite ??= name; // skip-step: handed over; the comm side skips the group's update
    }
    if (modelIndex >= vars.length) { headGrads[modelIndex - vars.length] = values.slice(); return; }
    const spec = layout.variables[byModelIndex[modelIndex]];
    grads.set(values, spec.offset);
    const now = wallNow();
    if (lastReady === 0) lastReady = backwardStart;
    if (now > lastReady) span('backward', `backward ${spec.layer}`, lastReady, now);
    lastReady = now;
    gradientReady$.next({ step: s, start: spec.offset, end: spec.offset + spec.size, layer: spec.layer, at: now });
  });
  const loss = config.method === 'partial-fc' ? partialFcLoss : value.dataSync()[0];
  value.dispose();
  tf.dispose([xs, ys]);
  if (!(nonFinite && headGrads.some(g => firstNonFinite(g) >= 0))) head?.update(headGrads, s); // local: never exchanged
  const t2 = wallNow();
  enter('idle');
  send({ type: 'stepDone', device, step: s, loss, correct, count: config.perDevice, computeMs: t2 - t1, loadMs: t1 - t0, numTensors: tf.memory().numTensors, spans, nonFinite });
}

function firstNonFinite(values: Float32Array): number {
  for (let i = 0; i < values.length; i++) if (!Number.isFinite(values[i])) return i;
  return -1;
}

/** `onNan: 'error'`: raised before the gradient is handed over, so before it can reach any parameter. */
function nonFiniteError(value: number, name: string, at: number, s: number): TandemError {
  return new TandemError('NON_FINITE', `the gradient of ${name} has ${value} at element ${at} in step ${s} (the first non-finite gradient of ` +
    "this backward pass, output layer first); lower the learning rate, check the inputs, clip the loss, or use onNan: 'skip-step'");
}

function partialFcContext(s: number): PartialFcContext {
  const c = config.classifier!;
  const B = config.batch;
  const globalLabels = new Int32Array(B);
  for (let d = 0; d < config.devices; d++) {
    const at = inputSlotIndex(d, s % INPUT_SLOTS) * buffers.labelSlotSize;
    globalLabels.set(new Int32Array(buffers.labels, at * 4, config.perDevice), d * config.perDevice);
  }
  return {
    tf, control, device, devices: config.devices, perDevice: config.perDevice, embedding: c.embedding, buffers: buffers.partialFc!,
    globalLabels, owner: partition!.owner, localIndex: partition!.localIndex, localClasses: partition!.size(device),
    sampleRate: c.sampleRate, seed: config.seed, step: s, w: head!.vars[0], b: head!.vars[1],
  };
}

async function finish(lastStep: number, exportModel: boolean): Promise<void> {
  step = lastStep;
  enter('export');
  waitForUpdate(lastStep);
  writeVariables(params, 'write');
  const artifacts = exportModel ? await modelArtifacts(tf, model) : undefined;
  enter('done');
  const headValues = head ? { ...head.values(), labels: head.config.labels } : undefined;
  send({ type: 'finished', device, artifacts, head: headValues, numTensors: tf.memory().numTensors }, artifacts ? [artifacts.weightData] : []);
}
