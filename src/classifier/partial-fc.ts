/**
 * The Partial FC comparison mode (insightface): every device computes logits
 * for its own class shard over the whole global batch, and the softmax is
 * normalised over all classes of all devices. Inside one step, on the compute
 * threads, through the compute communicator's blocking collectives (this runs
 * inside the synchronous backward pass):
 *   1. all-gather the features (labels are already in the shared input buffers),
 *   2. all-reduce (max) the per-sample max of the logits,
 *   3. all-reduce (sum) the per-sample sum of exponentials,
 *   4. all-reduce (sum) the feature gradients, all-gather the loss parts.
 * Every reduction adds the ranks in rank order, so all get the same bits.
 * The reads between the collectives are synchronous on cpu engines and
 * awaited on webgpu (one generator, `hostPart`, serves both).
 * Negative class centres may be sampled (`sampleRate` < 1): each device keeps
 * the classes present in the global batch and a seeded random share of the rest.
 * Linear heads only.
 */
import type { Tf, Tensor } from '../engine/tfjs-types.js';
import type { BlockingCollective } from '../collectives/collective.js';
import { prng } from '../data/synthetic-images.js';

/** Floats per rank a staging area needs to move Partial FC's largest exchange (the feature gradients) in one piece. */
export function partialFcStagingFloats(batch: number, embedding: number): number {
  return batch * embedding;
}

export interface PartialFcContext {
  tf: Tf;
  /** The compute communicator (one rank per device, in device order). */
  collective: BlockingCollective;
  device: number;
  devices: number;
  perDevice: number;
  embedding: number;
  /** Global labels of the global batch (rank order of the devices' shards). */
  globalLabels: Int32Array;
  /** owner[label], localIndex[label]. */
  owner: Int32Array;
  localIndex: Int32Array;
  localClasses: number;
  sampleRate: number;
  seed: number;
  step: number;
  w: Tensor;
  b: Tensor;
}

export interface PartialFcResult {
  /**
   * sum(embedding * dL/dembedding * devices): its gradient is this device's share of the extractor gradient, ready for
   * an all-reduce mean.
   */
  surrogate: Tensor;
  /** The global mean loss (the same on every device). */
  loss: number;
  /** Correct predictions among the samples whose labels this device owns. */
  correct: number;
  /** dL/dW [E, C_local] and dL/db [C_local] (zeros for unsampled centres). */
  headGrads: Float32Array[];
}

/** The classes of this device's shard in this step's softmax: all, or positives + sampled negatives. */
export function sampledClasses(
  ctx: Pick<
    PartialFcContext,
    'globalLabels' | 'owner' | 'localIndex' | 'device' | 'localClasses' | 'sampleRate' | 'seed' | 'step'
  >,
): Int32Array {
  const { localClasses, sampleRate } = ctx;
  if (sampleRate >= 1) return Int32Array.from({ length: localClasses }, (_, i) => i);
  const keep = new Uint8Array(localClasses);
  let kept = 0;
  for (const y of ctx.globalLabels)
    if (ctx.owner[y] === ctx.device && !keep[ctx.localIndex[y]]) {
      keep[ctx.localIndex[y]] = 1;
      kept++;
    }
  const want = Math.max(kept, Math.round(sampleRate * localClasses));
  const r = prng(ctx.seed * 7919 + ctx.step * 104729 + ctx.device);
  const negatives: number[] = [];
  for (let i = 0; i < localClasses; i++) if (!keep[i]) negatives.push(i);
  for (let i = negatives.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [negatives[i], negatives[j]] = [negatives[j], negatives[i]];
  }
  for (let i = 0; kept < want && i < negatives.length; i++, kept++) keep[negatives[i]] = 1;
  const out: number[] = [];
  keep.forEach((k, i) => {
    if (k) out.push(i);
  });
  return Int32Array.from(out);
}

/**
 * What the host part of a step leaves: the embedding's gradient rows (already times `devices`), the loss, the head's
 * gradients.
 */
interface HostPart {
  dy: Float32Array;
  loss: number;
  correct: number;
  headGrads: Float32Array[];
}

/** One step on an engine with synchronous reads: every read inside one tidy. */
export function partialFcStep(ctx: PartialFcContext, embedding: Tensor): PartialFcResult {
  let host!: HostPart; // a plain object leaves the tidy through this (returning it would make tidy walk every element)
  ctx.tf.tidy(() => {
    const steps = hostPart(ctx, embedding);
    let next = steps.next();
    while (!next.done) next = steps.next(next.value.dataSync() as Float32Array);
    host = next.value;
  });
  return result(ctx, embedding, host);
}

/**
 * One step on an engine without synchronous reads (webgpu): every read awaited. Runs inside the forward's
 * scope (backwardWithGradientReadyAsync), which disposes the intermediate tensors.
 */
export async function partialFcStepAsync(ctx: PartialFcContext, embedding: Tensor): Promise<PartialFcResult> {
  const steps = hostPart(ctx, embedding);
  let next = steps.next();
  while (!next.done) next = steps.next((await next.value.data()) as Float32Array);
  return result(ctx, embedding, next.value);
}

function result(ctx: PartialFcContext, embedding: Tensor, host: HostPart): PartialFcResult {
  const surrogate = ctx.tf.sum(ctx.tf.mul(embedding, ctx.tf.tensor(host.dy, embedding.shape)));
  return { surrogate, loss: host.loss, correct: host.correct, headGrads: host.headGrads };
}

/**
 * The step between its collectives, as a sequence of reads: it yields each tensor whose values it needs on the
 * host and resumes with them (the caller reads synchronously or awaits), so both kinds of engine run one code.
 * A yielded array may be the engine's own buffer: it is copied before it is changed.
 */
function* hostPart(ctx: PartialFcContext, embedding: Tensor): Generator<Tensor, HostPart, Float32Array> {
  const { tf, collective, device, devices, perDevice } = ctx;
  const E = ctx.embedding,
    B = perDevice * devices;

  // 1. all-gather features.
  const features = new Float32Array(B * E);
  collective.allGather(yield embedding, features);

  const selected = sampledClasses(ctx);
  const K = selected.length;
  // Target column (in `selected`) of each sample this device owns, else -1.
  const position = new Int32Array(ctx.localClasses).fill(-1);
  selected.forEach((c, j) => {
    position[c] = j;
  });
  const target = Int32Array.from(ctx.globalLabels, y => (ctx.owner[y] === device ? position[ctx.localIndex[y]] : -1));

  const fAll = tf.tensor(features, [B, E]);
  const idx = tf.tensor1d(selected, 'int32');
  const wSel = K === ctx.localClasses ? ctx.w : tf.gather(ctx.w, idx, 1);
  const bSel = K === ctx.localClasses ? ctx.b : tf.gather(ctx.b, idx);
  const z = tf.add(tf.matMul(fAll, wSel), bSel);
  // 2. global max per sample.
  const m = Float32Array.from(yield tf.max(z, 1));
  collective.allReduce(m, 0, B, 'max');
  const e = tf.exp(tf.sub(z, tf.tensor(m, [B, 1])));
  // 3. global sum of exponentials per sample.
  const total = Float32Array.from(yield tf.sum(e, 1));
  collective.allReduce(total, 0, B, 'sum');
  const p = tf.div(e, tf.tensor(total, [B, 1]));
  const pData = yield p;
  const zData = yield z;
  let loss = 0,
    correct = 0;
  const oneHot = new Float32Array(B * K);
  for (let i = 0; i < B; i++) {
    if (target[i] < 0) continue;
    oneHot[i * K + target[i]] = 1;
    loss -= Math.log(pData[i * K + target[i]]);
    if (zData[i * K + target[i]] >= m[i]) correct++;
  }
  const dz = tf.div(tf.sub(p, tf.tensor(oneHot, [B, K])), B);
  const dW = tf.matMul(fAll, dz, true, false);
  const db = tf.sum(dz, 0);
  // 4. feature gradients summed over devices (this device keeps its samples' rows); loss parts gathered.
  const dF = Float32Array.from(yield tf.matMul(dz, wSel, false, true));
  collective.allReduce(dF, 0, B * E, 'sum');
  const mySlice = dF.slice(device * perDevice * E, (device + 1) * perDevice * E);
  const parts = new Float32Array(2 * devices);
  collective.allGather(Float32Array.of(loss, correct), parts);
  let lossSum = 0;
  for (let d = 0; d < devices; d++) lossSum += parts[2 * d];
  // Scatter the sampled centres' gradients back into the full head.
  const dWData = yield dW,
    dbData = yield db;
  const gradW = new Float32Array(E * ctx.localClasses),
    gradB = new Float32Array(ctx.localClasses);
  selected.forEach((c, j) => {
    gradB[c] = dbData[j];
    for (let r = 0; r < E; r++) gradW[r * ctx.localClasses + c] = dWData[r * K + j];
  });
  // the pipeline averages; the global loss needs the sum
  for (let k = 0; k < mySlice.length; k++) mySlice[k] *= devices;
  return { dy: mySlice, loss: lossSum / B, correct, headGrads: [gradW, gradB] };
}
