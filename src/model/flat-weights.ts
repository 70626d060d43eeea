/**
 * A list of model weights as one flat Float32Array (in list order), and back: how state crosses threads and
 * collectives.
 */
import type { LayerVariable, Tensor, Tf, Variable } from '../engine/tfjs-types.js';

export function readFlat(vars: readonly LayerVariable[]): Float32Array {
  const parts = vars.map(v => v.read().dataSync() as Float32Array);
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** `readFlat` for an engine without synchronous reads (webgpu): every read started at once, awaited together. */
export async function readFlatAsync(vars: readonly LayerVariable[]): Promise<Float32Array> {
  const parts = await Promise.all(vars.map(v => v.read().data() as Promise<Float32Array>));
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function writeFlat(tf: Tf, vars: readonly LayerVariable[], flat: Float32Array): void {
  let at = 0;
  for (const v of vars) {
    const size = (v.shape as number[]).reduce((a, b) => a * b, 1);
    const t = tf.tensor(flat.subarray(at, at + size), v.shape as number[], 'float32');
    assignWeight(v, t);
    t.dispose();
    at += size;
  }
}

/**
 * Sets a weight's value as tfjs's optimizers do: without its constraint (kernelConstraint, …). tfjs 4.22
 * applies a constraint only in LayerVariable.write (setWeights), never while `model.fit` trains; tandem
 * trains as that one engine does, so writing a replica's weights must not project them either.
 */
export function assignWeight(v: LayerVariable, value: Tensor): void {
  (v.read() as Variable).assign(value);
}
