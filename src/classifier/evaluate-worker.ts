/**
 * Worker entry of the held-out evaluation, on the run's backend: embeddings
 * of the held-out samples from the exported extractor; nearest class-centre
 * accuracy (centres from the even-numbered held-out samples, probes the odd
 * ones, cosine similarity); and, with the assembled heads, full-classifier
 * accuracy over all C classes.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as tf from '#tfjs';
import { serializeError } from '../errors.js';
import { startBackend, type BackendName } from '../engine/backend.js';
import { SampleReader } from '../data/one-sample-view.js';
import { resolveDataset } from '../data/resolve-dataset.js';
import { checkedClassLabel } from '../data/class-labels.js';
import { sourcePath } from '../source-path.js';
import { loadPlugins } from '../plugins/load-plugins.js';
import { outputLossOf } from '../model/output-loss.js';
import type { DatasetSpec } from '../data/dataset.js';
import type { ModelArtifactsData } from '../actors/protocol.js';

export interface EvaluateRequest {
  backend: BackendName;
  /** The run's plugin modules (a plugin engine must be registered here too). */
  plugins: string[];
  extractor: ModelArtifactsData;
  data: DatasetSpec;
  from: number;
  to: number;
  classes: number;
  embedding: number;
  head: 'linear' | 'cosine';
  /** The assembled heads; absent when the model itself is the classifier (data-parallel). */
  w?: Float32Array;
  b?: Float32Array;
  /** Evaluate at most this many held-out samples (the first ones). */
  maxSamples: number;
}
export type EvaluateReply =
  | { type: 'result'; samples: number; centreAccuracy?: number; centreProbes?: number; classifierAccuracy: number }
  | { type: 'error'; error: ReturnType<typeof serializeError> };

const port = parentPort!;
evaluate(workerData as EvaluateRequest).then(
  r => port.postMessage({ type: 'result', ...r } satisfies EvaluateReply),
  err => port.postMessage({ type: 'error', error: serializeError(err) } satisfies EvaluateReply),
);

async function evaluate(
  req: EvaluateRequest,
): Promise<{ samples: number; centreAccuracy?: number; centreProbes?: number; classifierAccuracy: number }> {
  await loadPlugins(req.plugins);
  await startBackend(tf, req.backend);
  const model = await tf.loadLayersModel(
    tf.io.fromMemory({
      modelTopology: req.extractor.modelTopology,
      weightSpecs: req.extractor.weightSpecs as never,
      weightData: req.extractor.weightData,
    }),
  );
  const held = await embedHeldOut(req, model);
  const headW = req.w;
  if (!headW) {
    // the model is the classifier: its outputs are the class scores
    const correct = modelCorrect(model, held, req.classes);
    model.dispose();
    return { samples: held.n, classifierAccuracy: correct / held.n };
  }
  const { probes, hits } = nearestCentre(held, req.classes);
  const correct = await classifierCorrect(req, headW, held);
  model.dispose();
  // No probe (an odd-numbered sample of a class with a centre): no centre accuracy, rather than 0%.
  return {
    samples: held.n,
    centreAccuracy: probes ? hits / probes : undefined,
    centreProbes: probes,
    classifierAccuracy: correct / held.n,
  };
}

/** The held-out samples through the model: n of them, E outputs each (raw, and unit length), and their labels. */
interface HeldOut {
  n: number;
  E: number;
  emb: Float32Array;
  raw: Float32Array;
  labels: Int32Array;
}

async function embedHeldOut(req: EvaluateRequest, model: tf.LayersModel): Promise<HeldOut> {
  const ds = await resolveDataset(req.data);
  const n = Math.min(req.to - req.from, req.maxSamples),
    C = req.classes;
  // The model as classifier outputs one score per class, or one for a binary model (two classes).
  const E = req.w ? req.embedding : (model.outputs[0].shape.at(-1) as number);
  const reader = new SampleReader(ds, req.data.source);
  const per = reader.sampleFloats;
  const emb = new Float32Array(n * E),
    raw = new Float32Array(n * E);
  const labels = new Int32Array(n);
  const chunk = 128;
  for (let start = 0; start < n; start += chunk) {
    const m = Math.min(chunk, n - start);
    const x = new Float32Array(m * per);
    for (let i = 0; i < m; i++) {
      const index = req.from + start + i; // held-out samples no loader reads: their labels are checked here
      labels[start + i] = checkedClassLabel(reader.read(index, x, i * per), C, sourcePath(req.data.source), index);
    }
    const e = tf.tidy(() => model.predict(tf.tensor(x, [m, ...ds.sampleShape])) as tf.Tensor);
    const unit = tf.tidy(() => tf.div(e, tf.add(tf.norm(e, 'euclidean', 1, true), 1e-12)));
    raw.set((await e.data()) as Float32Array, start * E); // await data(): every engine, webgpu included
    emb.set((await unit.data()) as Float32Array, start * E);
    tf.dispose([e, unit]);
  }
  return { n, E, emb, raw, labels };
}

/** The model is the classifier: how many of its top scores (or binary outputs past the threshold) are right. */
function modelCorrect(model: tf.LayersModel, { n, E, raw, labels }: HeldOut, C: number): number {
  let correct = 0;
  const spec = outputLossOf(model, C);
  const binary = E === 1 && spec.kind === 'binary';
  const threshold = spec.fromProbabilities ? 0.5 : 0;
  for (let i = 0; i < n; i++) {
    if (binary) {
      if (Number(raw[i] > threshold) === labels[i]) correct++;
      continue;
    }
    let best = 0;
    for (let c = 1; c < C; c++) if (raw[i * E + c] > raw[i * E + best]) best = c;
    if (best === labels[i]) correct++;
  }
  return correct;
}

/** Nearest class centre: centres from even held-out samples, probes are the odd ones. */
function nearestCentre({ n, E, emb, labels }: HeldOut, C: number): { probes: number; hits: number } {
  const centres = new Float32Array(C * E),
    counts = new Int32Array(C);
  for (let i = 0; i < n; i += 2) {
    counts[labels[i]]++;
    for (let e = 0; e < E; e++) centres[labels[i] * E + e] += emb[i * E + e];
  }
  const withCentre: number[] = [];
  for (let c = 0; c < C; c++) {
    if (!counts[c]) continue;
    withCentre.push(c);
    let norm = 0;
    for (let e = 0; e < E; e++) norm += centres[c * E + e] ** 2;
    norm = Math.sqrt(norm) + 1e-12;
    for (let e = 0; e < E; e++) centres[c * E + e] /= norm;
  }
  let probes = 0,
    hits = 0;
  for (let i = 1; i < n; i += 2) {
    if (!counts[labels[i]]) continue;
    probes++;
    let best = -1,
      bestScore = -Infinity;
    for (const c of withCentre) {
      let s = 0;
      for (let e = 0; e < E; e++) s += emb[i * E + e] * centres[c * E + e];
      if (s > bestScore) {
        bestScore = s;
        best = c;
      }
    }
    if (best === labels[i]) hits++;
  }
  return { probes, hits };
}

/** Full classifier over all C classes: how many held-out samples the gathered head classifies right. */
async function classifierCorrect(req: EvaluateRequest, headW: Float32Array, { n, E, emb, raw, labels }: HeldOut) {
  const C = req.classes;
  const predicted = tf.tidy(() => {
    const probesT = tf.tensor(req.head === 'linear' ? raw : emb, [n, E]);
    let w = tf.tensor(headW, [E, C]);
    if (req.head === 'cosine') w = tf.div(w, tf.add(tf.norm(w, 'euclidean', 0, true), 1e-12));
    const logits =
      req.head === 'linear' && req.b ? tf.add(tf.matMul(probesT, w), tf.tensor(req.b)) : tf.matMul(probesT, w);
    return tf.argMax(logits, 1);
  });
  const pred = await predicted.data();
  predicted.dispose();
  let correct = 0;
  for (let i = 0; i < n; i++) if (pred[i] === labels[i]) correct++;
  return correct;
}
