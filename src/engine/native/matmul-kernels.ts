/**
 * BatchMatMul and _FusedMatMul on oneDNN. Covered: float32, rank >= 2, batch
 * dims equal on both sides or one side's batch of size 1 (broadcast);
 * _FusedMatMul with a bias of [N] (or [1, ..., N]) and linear/relu/relu6/
 * leakyrelu/sigmoid/elu (prelu falls back). Transposes are read in place. In bf16, a weight operand within a
 * step's scope (bf16-shadows.ts) is cast once for every matmul reading it.
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
import { weightShadow, settle } from './bf16-shadows.js';

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

  const epilogue = fused ? fusedEpilogue(args, n, outer.length) : { bias: null, activation: 0, alpha: 0 };
  if (!epilogue) return undefined;
  const { bias, activation, alpha } = epilogue;
  const shape = [...outer, m, n];
  const c = overwrittenOutput(sizeOf(shape));
  const as = weightShadow(ctx, a),
    bs = weightShadow(ctx, b);
  const filled = ctx.addon.matmul(
    a,
    b,
    bias,
    c,
    batchA,
    batchB,
    m,
    k,
    n,
    transposeA,
    transposeB,
    activation,
    alpha,
    as?.bits,
    as?.filled,
    bs?.bits,
    bs?.filled,
  );
  settle(as, filled, 1);
  settle(bs, filled, 2);
  return output(backend, shape, c);
}

/** _FusedMatMul's bias and activation; undefined where the addon has none (prelu, a bias of rank above c's). */
function fusedEpilogue(args: NativeKernelArgs, n: number, outerRank: number) {
  const code = activationCode(args.attrs.activation);
  if (code === undefined || optionalInput(args, 'preluActivationWeights')) return undefined;
  const alpha = (args.attrs.leakyreluAlpha as number | undefined) ?? 0.2;
  const biasInput = optionalInput(args, 'bias');
  if (!biasInput) return { bias: null, activation: code, alpha };
  const bias = float32Values(args.backend, biasInput);
  if (!bias || !isLastAxisVector(biasInput.shape, n) || biasInput.shape.length > outerRank + 2) return undefined;
  return { bias, activation: code, alpha };
}

export function matmulKernels(ctx: NativeKernelContext): NativeKernel[] {
  return [
    { kernelName: 'BatchMatMul', run: args => runMatmul(ctx, args, false) },
    { kernelName: '_FusedMatMul', run: args => runMatmul(ctx, args, true) },
  ];
}
