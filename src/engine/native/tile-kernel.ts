/**
 * Tile (tf.tile, and tf.broadcastTo, which tfjs runs as Tile) of a float32 tensor by block copies: each input row is
 * copied once, then every finished block is repeated with `copyWithin`, doubling. The cpu kernel walks every output
 * element through index arithmetic. Values are copied, so the bits are the stock kernel's; other dtypes fall back.
 */
import { float32Values, output, overwrittenOutput, sizeOf, type NativeKernel } from './native-kernel.js';

/** `x` of `shape` repeated `reps[d]` times along each axis d, into `out` (row-major, sizeOf(shape)·Π reps floats). */
function tileInto(x: Float32Array, shape: readonly number[], reps: readonly number[], out: Float32Array): void {
  const rank = shape.length;
  const xStride = new Array<number>(rank).fill(1),
    outStride = new Array<number>(rank).fill(1);
  for (let d = rank - 2; d >= 0; d--) {
    xStride[d] = xStride[d + 1] * shape[d + 1];
    outStride[d] = outStride[d + 1] * shape[d + 1] * reps[d + 1];
  }
  const block = (d: number, xAt: number, outAt: number): void => {
    if (d === rank - 1 && shape[d] === 1) {
      out.fill(x[xAt], outAt, outAt + reps[d]); // one value repeated: the whole block at once
      return;
    }
    if (d === rank - 1) out.set(x.subarray(xAt, xAt + shape[d]), outAt);
    else for (let i = 0; i < shape[d]; i++) block(d + 1, xAt + i * xStride[d], outAt + i * outStride[d]);
    const once = shape[d] * outStride[d]; // the input's extent along d, tiled below d
    // the blocks made so far copied again in one call: ⌈log2(reps)⌉ calls, where one per repetition took reps − 1
    for (let done = 1; done < reps[d]; done *= 2)
      out.copyWithin(outAt + done * once, outAt, outAt + Math.min(done, reps[d] - done) * once);
  };
  block(0, 0, 0);
}

export function tileKernel(): NativeKernel {
  return {
    kernelName: 'Tile',
    run({ inputs, attrs, backend }) {
      const x = float32Values(backend, inputs.x);
      const shape = inputs.x.shape,
        reps = attrs.reps as number[];
      if (!x || shape.length === 0 || reps.length !== shape.length || x.length === 0) return undefined;
      if (!reps.every(r => Number.isInteger(r) && r >= 1)) return undefined; // the stock kernel names it
      const outShape = shape.map((d, i) => d * reps[i]);
      const out = overwrittenOutput(sizeOf(outShape));
      tileInto(x, shape, reps, out);
      return output(backend, outShape, out);
    },
  };
}
