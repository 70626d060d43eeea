/**
 * Every layer of a model alone, in topological order: the median time of its
 * forward (as training runs it: tape recording) and of its backward (forward
 * + gradients against a fixed upstream gradient, less the forward), on the
 * profiler's clock. A layer's inputs are the outputs its graph feeds it
 * (computed once, outside the timing); gradients are taken with respect to its
 * trainable weights and to those inputs that depend on a trainable weight (as
 * in training: nothing flows back into the model input). A layer called more
 * than once gets the sum of its calls. Each interval ends at a read of what it
 * computed (`fence`: synchronous, or awaited on an engine without synchronous reads).
 *
 * @example
 * // costs: one per layer call, in model order
 * const costs = await timeLayers(tf, layerGraph(tf, model), x, layerClock('calling-thread'), 3, readFence(true));
 */
import type { Tensor, Tf, Variable } from '../engine/tfjs-types.js';
import { forwardAsInTraining } from '../engine/gradient-tape.js';
import type { LayerCall, LayerGraph, Layer } from './layer-graph.js';
import type { LayerClock } from './layer-clock.js';
import type { LayerCost } from './layer-profile.js';
import type { ReadFence } from './read-fence.js';

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * Per-layer costs in `graph.layers` order (model order: input side first). `reps` timed repetitions after one
 * discarded.
 */
export async function timeLayers(
  tf: Tf,
  graph: LayerGraph,
  x: Tensor,
  clock: LayerClock,
  reps: number,
  fence: ReadFence,
): Promise<LayerCost[]> {
  const readCost = clockReadCost(clock);
  const costs = new Map<Layer, LayerCost>(graph.layers.map(layer => [layer, costOf(layer)]));
  const values = new Map<string, Tensor>([[graph.input, x]]);
  const fromWeights = new Set<string>(); // keys of tensors that depend on a trainable weight
  const lastUse = lastUses(graph.calls);
  for (const [at, call] of graph.calls.entries()) {
    const inputs = call.inputs.map(k => values.get(k)!);
    const differentiable = call.inputs.flatMap((k, i) => (fromWeights.has(k) ? [i] : []));
    const weights = call.layer.trainableWeights.map(w => w.read() as Variable);
    const outputs = tf.tidy(() => applied(call.layer, inputs));
    const times = await timeCall(tf, call, inputs, differentiable, weights, outputs, clock, reps, fence);
    const cost = costs.get(call.layer)!;
    cost.forwardMs += Math.max(0, times.forwardMs - readCost);
    cost.backwardMs += times.backwardMs; // a difference of two intervals: the reading's cost cancels
    cost.outputSize += outputs.reduce((s, o) => s + o.size, 0);
    if (weights.length > 0 || differentiable.length > 0) call.outputs.forEach(k => fromWeights.add(k));
    call.outputs.forEach((k, i) => values.set(k, outputs[i]));
    for (const [k, t] of values)
      if (k !== graph.input && (lastUse.get(k) ?? -1) <= at && k !== graph.output) {
        t.dispose();
        values.delete(k);
      }
  }
  for (const [k, t] of values) if (k !== graph.input) t.dispose();
  return graph.layers.map(layer => costs.get(layer)!);
}

function costOf(layer: Layer): LayerCost {
  const parameters = layer.trainableWeights.reduce((s, w) => s + w.read().size, 0);
  return {
    name: layer.name,
    className: layer.getClassName(),
    forwardMs: 0,
    backwardMs: 0,
    parameters,
    bytes: parameters * 4,
    outputSize: 0,
  };
}

function applied(layer: Layer, inputs: Tensor[]): Tensor[] {
  const out = layer.apply(inputs.length === 1 ? inputs[0] : inputs, { training: true }) as Tensor | Tensor[];
  return Array.isArray(out) ? out : [out];
}

/** Index of the last call that reads each key. */
function lastUses(calls: readonly LayerCall[]): Map<string, number> {
  const last = new Map<string, number>();
  calls.forEach((call, at) => call.inputs.forEach(k => last.set(k, at)));
  return last;
}

/** What one empty measurement reads on `clock` (each interval pays for one reading). */
function clockReadCost(clock: LayerClock): number {
  const empty: number[] = [];
  for (let i = 0; i < 9; i++) {
    const t0 = clock.nowMs();
    empty.push(clock.nowMs() - t0);
  }
  return median(empty);
}

async function timeCall(
  tf: Tf,
  call: LayerCall,
  inputs: Tensor[],
  differentiable: number[],
  weights: Variable[],
  outputs: Tensor[],
  clock: LayerClock,
  reps: number,
  fence: ReadFence,
): Promise<{ forwardMs: number; backwardMs: number }> {
  const dys = outputs.map((o, i) => tf.randomUniform(o.shape, -1, 1, 'float32', 2 + i));
  const forward: number[] = [],
    both: number[] = [];
  for (let r = 0; r <= reps; r++) {
    const t0 = clock.nowMs();
    const o = forwardAsInTraining(tf, () => applied(call.layer, inputs)[0]);
    const forwardRead = fence([o]);
    if (forwardRead) await forwardRead;
    o.dispose();
    const t1 = clock.nowMs();
    if (differentiable.length > 0 || weights.length > 0) {
      const grads = tf.tidy(() =>
        tf.grads((...args: Tensor[]) => {
          const ins = inputs.map((t, i) => (differentiable.includes(i) ? args[differentiable.indexOf(i)] : t));
          const sums = applied(call.layer, ins).map((out, i) => tf.sum(tf.mul(out, dys[i])));
          return sums.length === 1 ? sums[0] : tf.addN(sums);
        })([...differentiable.map(i => inputs[i]), ...weights]),
      );
      const gradientsRead = fence(grads);
      if (gradientsRead) await gradientsRead;
      tf.dispose(grads);
    }
    const t2 = clock.nowMs();
    if (r > 0) {
      forward.push(t1 - t0);
      both.push(t2 - t1);
    }
  }
  tf.dispose(dys);
  const forwardMs = median(forward);
  return { forwardMs, backwardMs: Math.max(0, median(both) - forwardMs) };
}
