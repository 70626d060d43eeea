/**
 * Before any thread starts: can backward reach every trainable weight of the
 * model? One forward on the caller's tfjs (cpu) records the kernels each layer
 * runs; a kernel on the way from a weight to the loss that has no gradient in
 * tfjs (StridedSlice, GatherNd, TopK, Cumprod, Einsum, …), or whose gradient
 * throws (Conv2D with dilation > 1: each one is run once), makes the run
 * impossible, and the error names the layer, its class, the kernel and the
 * way out; a stateful recurrent layer, and a layer whose forward throws inside tfjs (e.g. Resizing 4.22 in a
 * model) is named the same way. Kernels an engine lacks are another matter: every engine has a
 * path for every kernel training needs (wasm borrows the cpu backend's).
 */
import { TandemError } from '../errors.js';
import { nodesWithoutGradient, tapeLength } from '../engine/gradient-tape.js';
import type { LayersModel, Tensor, Tf, Variable } from '../engine/tfjs-types.js';
import { allLayers } from './all-layers.js';

interface LayerLike {
  name: string;
  getClassName(): string;
  call(inputs: Tensor | Tensor[], kwargs: Record<string, unknown>): Tensor | Tensor[];
  stateful?: boolean;
  layers?: LayerLike[];
  layer?: LayerLike;
  forwardLayer?: LayerLike;
  backwardLayer?: LayerLike;
}

/**
 * Throws BAD_CONFIG naming the first layer whose kernel has no gradient on the way from a trainable weight to the
 * output; `subject` begins the refusal (`model 'net.mjs'`, `fit: the model`).
 */
export function assertTrainable(tf: Tf, model: LayersModel, sampleShape: number[], subject: string): void {
  const spans: { layer: LayerLike; from: number; to: number }[] = [];
  const running: LayerLike[] = [];
  const restore: (() => void)[] = [];
  const layers = allLayers(model.layers as unknown as LayerLike[]);
  assertStateless(layers, subject);
  const visit = (layer: LayerLike) => {
    const stock = layer.call;
    layer.call = function (this: LayerLike, inputs, kwargs) {
      const from = tapeLength(tf);
      running.push(layer);
      const out = stock.call(this, inputs, kwargs);
      running.pop();
      spans.push({ layer, from, to: tapeLength(tf) });
      return out;
    };
    restore.push(() => {
      layer.call = stock;
    });
  };
  layers.forEach(visit);
  let missing: { kernelName: string; at: number; throws?: string }[];
  const x = tf.zeros([model.inputs[0].shape[0] ?? 2, ...sampleShape]); // a model built for a fixed batch size gets it
  try {
    missing = nodesWithoutGradient(
      tf,
      () => tf.sum(model.apply(x, { training: true }) as Tensor),
      model.trainableWeights.map(w => w.read() as Variable),
    ).missing;
  } catch (e) {
    throw forwardFailure(e, running.at(-1), subject);
  } finally {
    x.dispose();
    for (const r of restore) r();
  }
  if (missing.length === 0) return;
  const { kernelName, at, throws } = missing[0];
  // The innermost layer whose call recorded the node.
  const owner = spans.filter(s => s.from <= at && at < s.to).sort((a, b) => a.to - a.from - (b.to - b.from))[0]?.layer;
  const where = owner ? `layer '${owner.name}' (${owner.getClassName()})` : 'the model';
  const gradient =
    throws === undefined
      ? 'which has no gradient in TensorFlow.js'
      : `whose gradient throws in TensorFlow.js (${throws})`;
  throw new TandemError(
    'BAD_CONFIG',
    `${subject} cannot be trained: ${where} runs the kernel ${kernelName}, ${gradient}` +
      (`, and a trainable weight lies before it (or is its own). Freeze those weights (trainable: false), or compute ` +
        `it with ops that have `) +
      `gradients${kernelName === 'StridedSlice' ? ' (tf.slice instead of tf.stridedSlice)' : ''}.`,
  );
}

/** A forward pass of the model that throws inside tfjs, as a refusal naming the layer that threw. */
function forwardFailure(e: unknown, layer: LayerLike | undefined, subject: string): Error {
  if (e instanceof TandemError) return e;
  const where = layer ? `layer '${layer.name}' (${layer.getClassName()})` : 'the model';
  return new TandemError(
    'BAD_CONFIG',
    `${subject} cannot be trained: ${where} throws in a training forward pass on one ` +
      (`TensorFlow.js engine, before any device starts (${e instanceof Error ? e.message : String(e)}). ` +
        `TensorFlow.js itself cannot run it `) +
      'in a model: remove the layer, or do its work in the data module.',
  );
}

/** A stateful recurrent layer carries its state from one batch to the next: refused, naming it. */
function assertStateless(layers: LayerLike[], subject: string): void {
  const stateful = layers.find(l => l.stateful === true);
  if (!stateful) return;
  throw new TandemError(
    'BAD_CONFIG',
    `${subject} cannot be trained: layer '${stateful.name}' (${stateful.getClassName()}) is stateful — ` +
      ("its state carries from one batch to the next, and tandem's batches are shuffled samples split across " +
        'devices, and its state is ') +
      'no weight (checkpoints do not hold it). Build it with stateful: false.',
  );
}
