/**
 * The elementwise and reduction kernels that dominate a training profile once
 * convolutions and matmuls are native: Relu, the relu gradient (a kernel of
 * tandem's own, `TandemReluGrad`, used by the native backend's Relu gradient),
 * Add of a per-channel bias, and Sum over leading axes (the bias gradient) in
 * C++; any other broadcast of the binary arithmetic and comparison kernels
 * and Sum or Mean over any axes as flat loops (broadcast-kernels.ts). Each does the same float
 * operations in the same order as the stock kernel (bit-identical); other
 * dtypes fall back.
 */
import {
  float32Numbers,
  float32Values,
  isLastAxisVector,
  output,
  overwrittenOutput,
  sizeOf,
  type NativeKernel,
  type NativeKernelArgs,
  type NativeKernelContext,
} from './native-kernel.js';
import {
  ARITHMETIC_OPS,
  broadcastBinary,
  COMPARISON_OPS,
  reduceAxes,
  type BinaryOp,
  type FlatResult,
} from './broadcast-kernels.js';
import { outputShadow } from './bf16-shadows.js';
import { bf16OnlyOutput } from './bf16-only-outputs.js';

/** Kernel name of the fused relu gradient dx = dy * step(x). Registered on the native backend only. */
export const RELU_GRAD_KERNEL = 'TandemReluGrad';

export function elementwiseKernels(ctx: NativeKernelContext): NativeKernel[] {
  const { addon, tf } = ctx;
  return [
    {
      kernelName: 'Relu',
      run({ inputs, backend }) {
        const x = float32Values(backend, inputs.x);
        if (!x) return undefined;
        const y = overwrittenOutput(x.length);
        const ys = outputShadow(ctx, y); // filled in the same pass: a convolution that reads y next reads it
        addon.relu(x, y, x.length, ys?.bits ?? null);
        if (ys) ys.filled = true;
        return output(backend, [...inputs.x.shape], y);
      },
    },
    {
      kernelName: RELU_GRAD_KERNEL,
      run({ inputs, attrs, backend }) {
        const dy = float32Values(backend, inputs.dy),
          x = float32Values(backend, inputs.x);
        if (!dy || !x || dy.length !== x.length) return undefined;
        const dx = overwrittenOutput(x.length);
        // inside a fused convolution's gradient (onlyConvolutionsRead), dx is read by its gradients alone: bf16 alone
        const shape = [...inputs.x.shape];
        const bf16 =
          attrs?.onlyConvolutionsRead === true &&
          bf16OnlyOutput(ctx, backend, shape, dx, bits => addon.reluGrad(dy, x, null, x.length, bits));
        if (bf16) return bf16;
        // elsewhere no shadow: after a residual add (resnet) an add reads dx, and a shadow cost more than it saved
        addon.reluGrad(dy, x, dx, x.length);
        return output(backend, shape, dx);
      },
    },
    addKernel(ctx),
    sumKernel(ctx),
    ...[...ARITHMETIC_OPS.filter(op => op !== 'Add'), ...COMPARISON_OPS].map(op => binaryKernel(op, addon)),
    {
      kernelName: 'Mean',
      run({ inputs, attrs, backend }) {
        const x = float32Values(backend, inputs.x),
          shape = inputs.x.shape;
        if (!x || shape.length === 0 || x.length === 0) return undefined;
        const axes = [...new Set(tf.util.parseAxisParam(attrs.axis as number | number[], shape))].sort((p, q) => p - q);
        return flatOutput(backend, reduceAxes('mean', shape, x, axes, attrs.keepDims === true, addon));
      },
    },
  ];
}

/** Add: full + a vector along the last axis (either way round) in C++; any other broadcast in flat loops. */
function addKernel({ addon }: NativeKernelContext): NativeKernel {
  return {
    kernelName: 'Add',
    run({ inputs, backend }) {
      const a = float32Values(backend, inputs.a),
        b = float32Values(backend, inputs.b);
      if (!a || !b) return undefined;
      // full + vector along the last axis, either way round (float addition commutes exactly)
      const [full, fullValues, vector, vectorValues] =
        a.length >= b.length ? [inputs.a, a, inputs.b, b] : [inputs.b, b, inputs.a, a];
      const cols = full.shape[full.shape.length - 1];
      if (
        full.shape.length === 0 ||
        vector.shape.length > full.shape.length ||
        !isLastAxisVector(vector.shape, cols) ||
        cols < 1
      ) {
        return flatOutput(backend, broadcastBinary('Add', inputs.a.shape, a, inputs.b.shape, b, addon));
      }
      const y = overwrittenOutput(fullValues.length);
      addon.addRowVector(fullValues, vectorValues, y, fullValues.length / cols, cols);
      return output(backend, [...full.shape], y);
    },
  };
}

/** Sum over leading axes: a column sum over contiguous rows, in C++; other axes: flat loops. */
function sumKernel({ addon, tf }: NativeKernelContext): NativeKernel {
  return {
    kernelName: 'Sum',
    run({ inputs, attrs, backend }) {
      const x = float32Values(backend, inputs.x);
      if (!x) return undefined;
      const shape = inputs.x.shape;
      const axes = [...new Set(tf.util.parseAxisParam(attrs.axis as number | number[], shape))].sort((p, q) => p - q);
      if (shape.length === 0 || x.length === 0) return undefined;
      // leading axes: a column sum over contiguous rows, in C++; other axes: flat loops
      if (axes.length === 0 || axes.some((axis, i) => axis !== i))
        return flatOutput(backend, reduceAxes('sum', shape, x, axes, attrs.keepDims === true, addon));
      const kept = shape.slice(axes.length);
      const cols = sizeOf(kept);
      if (cols < 1) return undefined;
      const out = overwrittenOutput(cols);
      addon.sumRows(x, out, x.length / cols, cols);
      const outShape = attrs.keepDims ? shape.map((d, i) => (i < axes.length ? 1 : d)) : kept;
      return output(backend, outShape, out);
    },
  };
}

function binaryKernel(op: BinaryOp, addon: NativeKernelContext['addon']): NativeKernel {
  return {
    kernelName: op,
    run({ inputs, backend }) {
      const a = float32Numbers(backend, inputs.a),
        b = float32Numbers(backend, inputs.b);
      return a && b ? flatOutput(backend, broadcastBinary(op, inputs.a.shape, a, inputs.b.shape, b, addon)) : undefined;
    },
  };
}

function flatOutput(backend: NativeKernelArgs['backend'], result: FlatResult | undefined) {
  return result && backend.makeTensorInfo(result.shape, result.dtype, result.values);
}
