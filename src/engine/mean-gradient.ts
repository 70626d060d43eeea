/**
 * Mean's gradient without its `ones`. tfjs's is `div(mul(reshape(dy), ones(x.shape)), n)`: it fills an x-sized array
 * of ones in JS, multiplies by it (a broadcast pass) and divides (a second pass) — resnet-mini's global average pooling
 * spent ~0.5 ms of a step there. Here `broadcastTo(div(reshape(dy), n), x.shape)`: the small tensor divided, then one
 * copy out (Tile). Each element is dy/n either way (times one is exact), so the bits are tfjs's.
 *
 * @example
 * registerMeanGradient(tf); // once per tfjs instance, for every backend
 */
import type { Tensor, Tf } from './tfjs-types.js';

export function registerMeanGradient(tf: Tf): void {
  tf.registerGradient({
    kernelName: 'Mean',
    inputsToSave: ['x'],
    gradFunc: (dy: Tensor | Tensor[], saved: Tensor[], attrs: Record<string, unknown>) => {
      const [x] = saved;
      const axes = tf.util.parseAxisParam(attrs.axis as number | number[], x.shape);
      const [, reduceShape] = tf.backend_util.computeOutAndReduceShapes(x.shape, axes);
      const n = tf.util.sizeFromShape(reduceShape);
      const expanded = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
      return { x: () => tf.broadcastTo(tf.div(tf.reshape(dy as Tensor, expanded), n), x.shape) };
    },
  });
}
