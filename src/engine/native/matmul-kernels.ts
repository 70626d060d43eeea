/**
 * BatchMatMul and _FusedMatMul on oneDNN. Covered: float32, rank >= 2, batch
 * dims equal on both sides or one side's batch of size 1 (broadcast);
 * _FusedMatMul with a bias of [N] (or [1, ..., N]) and linear/relu/relu6/
 * leakyrelu/sigmoid/elu (prelu falls back). Transposes are read in place.
 */
import {
  activationCode,
  float32Values,
  isLastAxisVector,
  optionalInput,
  output,
  overwrittenOutput,
  sameShape,
  sizeOf,
  type NativeKernel,
  type NativeKernelArgs,
  type NativeKernelContext,
} from './native-kernel.js';

function runMatmul(ctx: NativeKernelContext, args: NativeKernelArgs, fused: boolean) {
  const { inputs, attrs, backend } = args;
  const { a: ta, b: tb } = inputs;
  const a = float32Values(backend, ta),
    b = float32Values(backend, tb);
  if (!a || !b || ta.shape.length < 2 || tb.shape.length < 2) return undefined;
  const transposeA = Boolean(attrs.transposeA),
    transposeB = Boolean(attrs.transposeB);
  const ra = ta.shape.length,
    rb = tb.shape.length;
  const m = transposeA ? ta.shape[ra - 1] : ta.shape[ra - 2];
  const k = transposeA ? ta.shape[ra - 2] : ta.shape[ra - 1];
  const kb = transposeB ? tb.shape[rb - 1] : tb.shape[rb - 2];
  const n = transposeB ? tb.shape[rb - 2] : tb.shape[rb - 1];
  if (k !== kb || m < 1 || n < 1 || k < 1) return undefined; // the stock kernel names the mismatch
  const outerA = ta.shape.slice(0, -2),
    outerB = tb.shape.slice(0, -2);
  const batchA = sizeOf(outerA),
    batchB = sizeOf(outerB);
  let outer: number[];
  if (sameShape(outerA, outerB)) outer = outerA;
  else if (batchA === 1 || batchB === 1) outer = ctx.tf.broadcast_util.assertAndGetBroadcastShape(outerA, outerB);
  else return undefined;

  let bias: Float32Array | null = null,
    activation = 0,
    alpha = 0;
  if (fused) {
    const code = activationCode(attrs.activation);
    if (code === undefined || optionalInput(args, 'preluActivationWeights')) return undefined;
    activation = code;
    alpha = (attrs.leakyreluAlpha as number | undefined) ?? 0.2;
    const biasInput = optionalInput(args, 'bias');
    if (biasInput) {
      const values = float32Values(backend, biasInput);
      if (!values || !isLastAxisVector(biasInput.shape, n) || biasInput.shape.length > outer.length + 2)
        return undefined;
      bias = values;
    }
  }
  const shape = [...outer, m, n];
  const c = overwrittenOutput(sizeOf(shape));
  ctx.addon.matmul(a, b, bias, c, batchA, batchB, m, k, n, transposeA, transposeB, activation, alpha);
  return output(backend, shape, c);
}

export function matmulKernels(ctx: NativeKernelContext): NativeKernel[] {
  return [
    { kernelName: 'BatchMatMul', run: args => runMatmul(ctx, args, false) },
    { kernelName: '_FusedMatMul', run: args => runMatmul(ctx, args, true) },
  ];
}
