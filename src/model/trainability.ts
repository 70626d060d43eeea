/**
 * Before any thread starts: can backward reach every trainable weight of the
 * model? One forward on the caller's tfjs (cpu) records the kernels each layer
 * runs; a kernel on the way from a weight to the loss that has no gradient in
 * tfjs (StridedSlice, GatherNd, TopK, Cumprod, Einsum, …) makes the run
 * impossible, and the error names the layer, its class, the kernel and the
 * way out; a layer whose forward throws inside tfjs (e.g. Resizing 4.22 in a
 * model) is named the same way. Kernels an engine lacks are another matter: every engine has a
 * path for every kernel training needs (wasm borrows the cpu backend's).
 */
import { TandemError } from '../errors.js';
import { nodesWithoutGradient, tapeLength } from '../engine/gradient-tape.js';
import type { LayersModel, Tensor, Tf, Variable } from '../engine/tfjs-types.js';

interface LayerLike {
  name: string;
  getClassName(): string;
  call(inputs: Tensor | Tensor[], kwargs: Record<string, unknown>): Tensor | Tensor[];
  layers?: LayerLike[];
}

/** Throws BAD_CONFIG naming the first layer whose kernel has no gradient on the way from a trainable weight to the output. */
export function assertTrainable(tf: Tf, model: LayersModel, sampleShape: number[], source: string): void {
  const spans: { layer: LayerLike; from: number; to: number }[] = [];
  const running: LayerLike[] = [];
  const restore: (() => void)[] = [];
  const visit = (layer: LayerLike) => {
    for (const inner of layer.layers ?? []) visit(inner);
    const stock = layer.call;
    layer.call = function (this: LayerLike, inputs, kwargs) {
      const from = tapeLength(tf);
      running.push(layer);
      const out = stock.call(this, inputs, kwargs);
      running.pop();
      spans.push({ layer, from, to: tapeLength(tf) });
      return out;
    };
    restore.push(() => { layer.call = stock; });
  };
  for (const layer of model.layers as unknown as LayerLike[]) visit(layer);
  let missing: { kernelName: string; at: number }[];
  const x = tf.zeros([2, ...sampleShape]);
  try {
    missing = nodesWithoutGradient(tf, () => tf.sum(model.apply(x, { training: true }) as Tensor),
      model.trainableWeights.map(w => w.read() as Variable)).missing;
  } catch (e) {
    throw forwardFailure(e, running.at(-1), source);
  } finally {
    x.dispose();
    for (const r of restore) r();
  }
  if (missing.length === 0) return;
  const { kernelName, at } = missing[0];
  // The innermost layer whose call recorded the node.
  const owner = spans.filter(s => s.from <= at && at < s.to).sort((a, b) => (a.to - a.from) - (b.to - b.from))[0]?.layer;
  const where = owner ? `layer '${owner.name}' (${owner.getClassName()})` : 'the model';
  throw new TandemError('BAD_CONFIG', `model '${source}' cannot be trained: ${where} runs the kernel ${kernelName}, which has no gradient in ` +
    `TensorFlow.js, and a trainable weight lies before it. Freeze the weights before it (trainable: false), or compute it with ops that have ` +
    `gradients${kernelName === 'StridedSlice' ? ' (tf.slice instead of tf.stridedSlice)' : ''}.`);
}

/** A forward pass of the model that throws inside tfjs, as a refusal naming the layer that threw. */
function forwardFailure(e: unknown, layer: LayerLike | undefined, source: string): Error {
  if (e instanceof TandemError) return e;
  const where = layer ? `layer '${layer.name}' (${layer.getClassName()})` : 'the model';
  return new TandemError('BAD_CONFIG', `model '${source}' cannot be trained: ${where} throws in a training forward pass on one ` +
    `TensorFlow.js engine, before any device starts (${e instanceof Error ? e.message : String(e)}). TensorFlow.js itself cannot run it ` +
    'in a model: remove the layer, or do its work in the data module.');
}
