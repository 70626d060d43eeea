/**
 * After a method-B or partial-fc run: what each device held and exchanged,
 * the full classifier assembled from the heads in label order (optional
 * export), and the held-out evaluation of the exported extractor. Across hosts
 * the heads come gathered from every host; only the host holding the exported
 * extractor (host 0) evaluates and assembles the full classifier.
 */
import { runOneShotWorker } from '../actors/one-shot-worker.js';
import { modelArtifacts } from '../actors/model-files.js';
import type { ResolvedConfig } from '../config-types.js';
import type { FromCompute, HeadValues, ModelArtifactsData } from '../actors/protocol.js';
import type { ParameterLayout } from '../model/parameter-layout.js';
import type { EvaluateReply, EvaluateRequest } from './evaluate-worker.js';
import { useQuietCpu } from '../engine/quiet-cpu.js';

export interface ClassifierSummary {
  method: string;
  classes: number;
  localClasses: number[];
  /** Classifier parameter bytes each device holds. */
  classifierBytesPerDevice: number[];
  /**
   * Bytes each device put through collectives per step: the shared (extractor) parameters, plus partial-fc's features
   * and statistics.
   */
  exchangedBytesPerStep: number;
  /** The shared-layout variables the collectives carried (never a head: heads are not in the shared layout). */
  carriedVariables: string[];
  /** centreAccuracy: over centreProbes probes; absent when there was none (too few held-out samples). */
  heldOut?: { samples: number; centreAccuracy?: number; centreProbes?: number; classifierAccuracy?: number };
  fullClassifier?: ModelArtifactsData;
  classifierPath?: string;
}

/** W [E, C] and b [C] in global label order, from every device's head. */
export function assembleClassifier(
  heads: HeadValues[],
  embedding: number,
  classes: number,
): { w: Float32Array; b?: Float32Array } {
  const w = new Float32Array(embedding * classes);
  const hasBias = heads.every(h => h.b);
  const b = hasBias ? new Float32Array(classes) : undefined;
  for (const h of heads) {
    const n = h.labels.length;
    h.labels.forEach((label, j) => {
      for (let e = 0; e < embedding; e++) w[e * classes + label] = h.w[e * n + j];
      if (b && h.b) b[label] = h.b[j];
    });
  }
  return { w, b };
}

export async function classifierResult(
  cfg: ResolvedConfig,
  layout: ParameterLayout,
  carried: { start: number; end: number }[],
  finished: (FromCompute & { type: 'finished' })[],
  extractor: ModelArtifactsData | undefined,
): Promise<ClassifierSummary> {
  const c = cfg.classifier!;
  const heads = worldHeadsOf(finished);
  const carriedVariables = layout.variables
    .filter(v => carried.some(r => v.offset < r.end && v.offset + v.size > r.start))
    .map(v => v.name);
  // `carried` holds what this process's devices reported: per device, divide by the local count.
  const collectiveBytes = carried.reduce((s, r) => s + (r.end - r.start) * 4, 0) / cfg.topology.localDevices;
  const partialFcBytes =
    cfg.method === 'partial-fc' ? (cfg.perDevice * c.embedding + 2 * cfg.batch + 2 + cfg.batch * c.embedding) * 4 : 0;
  const { w, b } = assembleClassifier(heads, c.embedding, cfg.classes);
  const heldOutCount = cfg.datasetSize - cfg.trainSize;
  let heldOut: ClassifierSummary['heldOut'];
  if (heldOutCount > 0 && extractor) {
    const reply = await evaluateHeldOut({
      backend: cfg.backend,
      plugins: cfg.plugins,
      extractor,
      data: cfg.data,
      from: cfg.trainSize,
      to: cfg.datasetSize,
      classes: cfg.classes,
      embedding: c.embedding,
      head: c.head,
      w,
      b,
      maxSamples: cfg.evalSamples,
    });
    heldOut = {
      samples: reply.samples,
      centreAccuracy: reply.centreAccuracy,
      centreProbes: reply.centreProbes,
      classifierAccuracy: reply.classifierAccuracy,
    };
  }
  const summary: ClassifierSummary = {
    method: cfg.method,
    classes: cfg.classes,
    localClasses: heads.map(h => h.labels.length),
    classifierBytesPerDevice: heads.map(h => h.w.byteLength + (h.b?.byteLength ?? 0)),
    exchangedBytesPerStep: collectiveBytes + partialFcBytes,
    carriedVariables,
    heldOut,
  };
  if (c.exportClassifier && extractor)
    summary.fullClassifier = await fullClassifierArtifacts(extractor, w, b, c.embedding, cfg.classes, c.head);
  return summary;
}

/**
 * Every global rank's head in rank order: gathered across hosts by the devices (`worldHeads`), or, in one
 * process, the local devices' own.
 */
function worldHeadsOf(finished: (FromCompute & { type: 'finished' })[]): HeadValues[] {
  const gathered = finished.find(f => f.worldHeads)?.worldHeads;
  return gathered ?? [...finished].sort((a, b) => a.device - b.device).map(f => f.head!);
}

/** Runs the held-out evaluation on its own worker thread, with the run's backend. */
export async function evaluateHeldOut(request: EvaluateRequest): Promise<Extract<EvaluateReply, { type: 'result' }>> {
  return runOneShotWorker<Extract<EvaluateReply, { type: 'result' }>>(
    new URL('./evaluate-worker.js', import.meta.url),
    request,
    'held-out evaluation',
  );
}

/**
 * extractor + a dense layer over all C classes (a cosine head as normalised centres: same argmax), as TF.js artifacts.
 */
async function fullClassifierArtifacts(
  extractor: ModelArtifactsData,
  w: Float32Array,
  b: Float32Array | undefined,
  embedding: number,
  classes: number,
  head: string,
): Promise<ModelArtifactsData> {
  const tf = await import('#tfjs');
  await useQuietCpu(tf);
  const base = await tf.loadLayersModel(
    tf.io.fromMemory({
      modelTopology: extractor.modelTopology,
      weightSpecs: extractor.weightSpecs as never,
      weightData: extractor.weightData,
    }),
  );
  let kernel = w;
  if (head === 'cosine') {
    kernel = w.slice();
    for (let c = 0; c < classes; c++) {
      let n = 0;
      for (let e = 0; e < embedding; e++) n += kernel[e * classes + c] ** 2;
      n = Math.sqrt(n) + 1e-12;
      for (let e = 0; e < embedding; e++) kernel[e * classes + c] /= n;
    }
  }
  const dense = tf.layers.dense({
    units: classes,
    useBias: b !== undefined && head === 'linear',
    name: 'classifier_all_classes',
  });
  const model = tf.sequential({ layers: [...base.layers, dense] });
  dense.setWeights(
    b !== undefined && head === 'linear'
      ? [tf.tensor(kernel, [embedding, classes]), tf.tensor(b)]
      : [tf.tensor(kernel, [embedding, classes])],
  );
  const out = await modelArtifacts(tf, model);
  model.dispose();
  return out;
}
