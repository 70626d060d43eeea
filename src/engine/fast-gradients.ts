/**
 * Faster training kernels and gradients for the tfjs `wasm` and `cpu` backends.
 *
 * Stock tfjs cannot train a CNN usefully on a CPU: the cpu backend's
 * Conv2DBackpropFilter is a naive loop and the wasm backend has none at all.
 * Everything here is composed from kernels the backend already runs fast
 * (Conv2D, Transpose, Slice, BatchMatMul) and falls back to the stock path for
 * any case it does not cover — never to a wrong answer.
 *
 * - `Conv2DBackpropFilter` kernel: dW[kh,kw,ci,co] is a stride-1 convolution of
 *   x (as [ci,H,W,B]) with dy (as a [oH,oW,B,co] filter, dilated by the
 *   forward stride). Registered for the fused-conv path too, which calls the
 *   kernel directly rather than through the Conv2D gradient.
 * - `Conv2D` gradient: for stride 1 (any padding), dx is a convolution of dy
 *   with the flipped, transposed filter; dW goes to the kernel above.
 * - `Conv2D` on wasm: a numeric or 'same' `pad` is rewritten as the equivalent
 *   explicit padding. Measured: the wasm kernel computes wrong values (and then
 *   corrupts its heap) for numeric pads and for 'same' with a 1-high filter and
 *   stride 2, where XNNPACK's own SAME rule is used; explicit pads are right.
 * - `Mean` gradient, every backend: the small gradient divided, then broadcast (mean-gradient.ts).
 * - `BatchMatMul` / `_FusedMatMul` on wasm: transposed operands are transposed
 *   explicitly first (wasm runs transpose-flagged matmul far slower).
 */
import { pair } from './kernel-attrs.js';
import { DEPTHWISE_GRADIENT_KERNELS, registerDepthwiseGradientKernel } from './depthwise-gradient-kernels.js';
import { registerMaxPoolGradientKernel } from './max-pool-gradient-kernel.js';
import { kernelOutput } from './kernel-output.js';
import { registerResizeNearestGradient } from './resize-nearest-gradient.js';
import { registerMeanGradient } from './mean-gradient.js';
import {
  convIsCovered,
  delegateToCpu,
  kernel,
  numericPadIsUniform,
  one,
  registerOnCpu,
  replaceWith,
  type KernelFunc,
} from './kernel-calls.js';
import type { Tf, TensorInfo, Tensor } from './tfjs-types.js';

export interface FastGradientsReport {
  backend: string;
  installed: string[];
}

const installedOn = new WeakMap<object, Set<string>>();

/** Installs the faster kernels/gradients for the current backend of `tf`. Idempotent per backend. */
export function installFastGradients(
  tf: Tf,
  backendName: string = tf.getBackend(),
  options: { convInputGradientAsConvolution?: boolean } = {},
): FastGradientsReport {
  const key = tf.engine() as object;
  if (options.convInputGradientAsConvolution === false) stockConvInputGradient(tf).add(backendName);
  const done = installedOn.get(key) ?? new Set<string>();
  installedOn.set(key, done);
  const installed: string[] = [];
  const once = (name: string, install: () => void) => {
    const id = `${backendName}:${name}`;
    if (done.has(id)) return;
    install();
    done.add(id);
    installed.push(name);
  };
  if (backendName === 'wasm' || backendName === 'cpu') {
    once('Conv2DBackpropFilter', () => registerConvBackpropFilterKernel(tf, backendName));
  }
  if (backendName === 'wasm') {
    // Kernels training needs that wasm lacks (depthwise/separable convolution gradients, the Embedding
    // gradient, einsum): the cpu backend's, on a copy of the data — correct, not fast.
    for (const name of WASM_MISSING_TRAINING_KERNELS) {
      if (!tf.getKernel(name, backendName) && tf.getKernel(name, 'cpu'))
        once(`${name}-on-cpu`, () => registerOnCpu(tf, backendName, name));
    }
    for (const name of WASM_WRONG_TRAINING_KERNELS) {
      once(`${name}-on-cpu`, () => {
        tf.unregisterKernel(name, backendName);
        registerOnCpu(tf, backendName, name);
      });
    }
    once('Conv2D-explicit-pad', () => registerExplicitPadConv(tf, backendName, 'Conv2D'));
    once('FusedConv2D-explicit-pad', () => registerExplicitPadConv(tf, backendName, 'FusedConv2D'));
    once('BatchMatMul', () => registerExplicitTransposeMatMul(tf, backendName, 'BatchMatMul'));
    once('_FusedMatMul', () => registerExplicitTransposeMatMul(tf, backendName, '_FusedMatMul'));
  }
  if (SEGMENT_SUM_BACKENDS.has(backendName)) once('UnsortedSegmentSum', () => registerSegmentSum(tf, backendName));
  if (FLAT_DEPTHWISE_BACKENDS.has(backendName)) {
    for (const name of DEPTHWISE_GRADIENT_KERNELS) {
      once(name, () =>
        registerDepthwiseGradientKernel(tf, backendName, name, (args: Parameters<KernelFunc>[0]) =>
          delegateToCpu(tf, name, args),
        ),
      );
    }
  }
  if (FLAT_DEPTHWISE_BACKENDS.has(backendName)) {
    once('MaxPoolGrad', () =>
      registerMaxPoolGradientKernel(tf, backendName, (args: Parameters<KernelFunc>[0]) =>
        delegateToCpu(tf, 'MaxPoolGrad', args),
      ),
    );
  }
  if (CPU_KERNEL_BACKENDS.has(backendName))
    once('ResizeNearestNeighborGrad', () => registerResizeNearestGradient(tf, backendName));
  once('Conv2D-gradient', () => registerConvGradient(tf));
  once('Mean-gradient', () => registerMeanGradient(tf));
  return { backend: backendName, installed };
}

/** The forward conv's geometry, and the padding that makes a stride-1, dilation-s convolution give fH x fW outputs. */
function filterGradientGeometry(tf: Tf, x: TensorInfo, attrs: Record<string, unknown>) {
  const filterShape = attrs.filterShape as [number, number, number, number];
  const info = tf.backend_util.computeConv2DInfo(
    x.shape as [number, number, number, number],
    filterShape,
    attrs.strides as [number, number] | number,
    1,
    attrs.pad as 'same',
    undefined,
    false,
    'channelsLast',
  );
  const { strideHeight: sH, strideWidth: sW, outHeight: oH, outWidth: oW, inHeight: H, inWidth: W } = info;
  const [fH, fW, C1] = filterShape;
  const top = info.padInfo.top,
    left = info.padInfo.left;
  const bottom = fH + sH * (oH - 1) - H - top;
  const right = fW + sW * (oW - 1) - W - left;
  return { sH, sW, H, W, C1, B: x.shape[0], top, left, bottom, right };
}

function registerConvBackpropFilterKernel(tf: Tf, backendName: string): void {
  const transpose = kernel(tf, 'Transpose', backendName);
  const conv = kernel(tf, 'Conv2D', backendName);
  const slice = kernel(tf, 'Slice', backendName);
  replaceWith(tf, backendName, 'Conv2DBackpropFilter', (args, fallback) => {
    const { inputs, backend, attrs } = args;
    if (!convIsCovered(attrs, attrs.filterShape as number[])) return fallback(args);
    const x = inputs.x,
      dy = inputs.dy;
    const { sH, sW, H, W, C1, B, top, left, ...pads } = filterGradientGeometry(tf, x, attrs);
    let { bottom, right } = pads;
    const temps: TensorInfo[] = [];
    let xT = one(transpose({ inputs: { x }, backend, attrs: { perm: [3, 1, 2, 0] } })); // [C1,H,W,B]
    temps.push(xT);
    if (bottom < 0 || right < 0) {
      // rows/cols the forward conv never read
      const keepH = H + Math.min(bottom, 0),
        keepW = W + Math.min(right, 0);
      xT = one(slice({ inputs: { x: xT }, backend, attrs: { begin: [0, 0, 0, 0], size: [C1, keepH, keepW, B] } }));
      temps.push(xT);
      bottom = Math.max(bottom, 0);
      right = Math.max(right, 0);
    }
    const dyT = one(transpose({ inputs: { x: dy }, backend, attrs: { perm: [1, 2, 0, 3] } })); // [oH,oW,B,C2]
    temps.push(dyT);
    const dwT = one(
      conv({
        inputs: { x: xT, filter: dyT },
        backend,
        attrs: {
          strides: [1, 1],
          pad: [
            [0, 0],
            [top, bottom],
            [left, right],
            [0, 0],
          ],
          dataFormat: 'NHWC',
          dilations: [sH, sW],
        },
      }),
    ); // [C1,fH,fW,C2]
    temps.push(dwT);
    const dw = one(transpose({ inputs: { x: dwT }, backend, attrs: { perm: [1, 2, 0, 3] } }));
    for (const t of temps) backend.disposeData(t.dataId);
    return dw;
  });
}

/** Runs a stock cpu kernel for a backend that lacks it: inputs copied to cpu, result copied back. */
/** Kernels wasm (tfjs-backend-wasm 4.22) has no implementation of, whose gradients common layers use. */
export const WASM_MISSING_TRAINING_KERNELS = ['DepthwiseConv2dNativeBackpropInput', 'Einsum'] as const;
/**
 * Kernels wasm (4.22) computes wrongly in training, run on the cpu backend's instead. MaxPoolGrad and
 * MaxPool3DGrad: where pooling windows hold tied maxima (zeros after a ReLU) wasm's kernels drop or double
 * gradients (16 equal values under a 3x3 'same' pooling: 1 of 16 outputs' gradients passed on); tfjs's
 * cpu kernels send each output's gradient to one input. (MaxPoolGrad then gets tandem's flat loops,
 * max-pool-gradient-kernel.ts, with the cpu kernel's bits.)
 */
export const WASM_WRONG_TRAINING_KERNELS = ['MaxPoolGrad', 'MaxPool3DGrad'] as const;

/** Backends whose UnsortedSegmentSum (the Embedding gradient) tandem replaces by one pass over the rows. */
const SEGMENT_SUM_BACKENDS = new Set(['cpu', 'native', 'wasm']);
/** Backends that run tfjs's cpu kernels (native underneath), whose wrong ResizeNearestNeighborGrad tandem replaces. */
const CPU_KERNEL_BACKENDS = new Set(['cpu', 'native']);
/**
 * Native runs every depthwise kernel and MaxPoolGrad in C++ (oneDNN, pool.cc); cpu and wasm get tandem's flat gradient
 * loops.
 */
const FLAT_DEPTHWISE_BACKENDS = new Set(['cpu', 'wasm']);

/**
 * UnsortedSegmentSum in one pass: out[ids[i]] += x[i], accumulated in float64 in row order, rounded once
 * — the bits of tfjs's cpu kernel (a masked sum per segment, accumulated the same way), without its
 * numSegments passes over x (seconds for an embedding gradient of 1,000 rows). Ids outside
 * [0, numSegments) are skipped, as the mask skips them.
 */
export function segmentSum(
  x: ArrayLike<number>,
  ids: ArrayLike<number>,
  numSegments: number,
  rowSize: number,
  out: Float32Array | Int32Array,
): void {
  const acc = new Float64Array(numSegments * rowSize);
  for (let i = 0; i < ids.length; i++) {
    const s = ids[i];
    if (!(s >= 0 && s < numSegments)) continue;
    const from = i * rowSize,
      to = s * rowSize;
    for (let k = 0; k < rowSize; k++) acc[to + k] += x[from + k];
  }
  out.set(acc);
}

function registerSegmentSum(tf: Tf, backendName: string): void {
  replaceWith(tf, backendName, 'UnsortedSegmentSum', args => {
    const { inputs, backend, attrs } = args;
    const { x, segmentIds } = inputs as { x: TensorInfo; segmentIds: TensorInfo };
    const numSegments = attrs.numSegments as number;
    const idCount = segmentIds.shape.reduce((a, b) => a * b, 1);
    const rowSize = x.shape.reduce((a, b) => a * b, 1) / Math.max(1, idCount);
    const outShape = [numSegments, ...x.shape.slice(segmentIds.shape.length)];
    const out = x.dtype === 'int32' ? new Int32Array(numSegments * rowSize) : new Float32Array(numSegments * rowSize);
    segmentSum(
      backend.readSync(x.dataId) as Float32Array,
      backend.readSync(segmentIds.dataId) as Int32Array,
      numSegments,
      rowSize,
      out,
    );
    return kernelOutput(backendName, backend, outShape, x.dtype === 'int32' ? 'int32' : 'float32', out);
  });
}

function registerExplicitTransposeMatMul(
  tf: Tf,
  backendName: string,
  kernelName: 'BatchMatMul' | '_FusedMatMul',
): void {
  if (!tf.getKernel(kernelName, backendName)) return;
  const transpose = kernel(tf, 'Transpose', backendName);
  replaceWith(tf, backendName, kernelName, (args, stockFunc) => {
    const { inputs, backend, attrs } = args;
    if (!attrs.transposeA && !attrs.transposeB) return stockFunc(args);
    const temps: TensorInfo[] = [];
    const swapLast = (t: TensorInfo): TensorInfo => {
      const r = t.shape.length;
      const perm = [...Array(r).keys()];
      [perm[r - 2], perm[r - 1]] = [perm[r - 1], perm[r - 2]];
      const out = one(transpose({ inputs: { x: t }, backend, attrs: { perm } }));
      temps.push(out);
      return out;
    };
    const size = (t: TensorInfo) => t.shape.reduce((p, d) => p * d, 1);
    const { a, b } = inputs;
    const ta = attrs.transposeA === true,
      tb = attrs.transposeB === true;
    const rows = ta ? a.shape[a.shape.length - 1] : a.shape[a.shape.length - 2];
    const cols = tb ? b.shape[b.shape.length - 2] : b.shape[b.shape.length - 1];
    const outSize = (size(a) / (a.shape[a.shape.length - 1] * a.shape[a.shape.length - 2])) * rows * cols;
    // op(A)·op(B) = (op'(B)·op'(A))^T: transposing the small operand and the output beats
    // transposing a big weight matrix (a dense layer's backward at small batch).
    const direct = (ta ? size(a) : 0) + (tb ? size(b) : 0);
    const swapped = (ta ? 0 : size(a)) + (tb ? 0 : size(b)) + outSize;
    const plain = kernelName === 'BatchMatMul';
    let out: TensorInfo | TensorInfo[];
    if (plain && swapped < direct) {
      const bb = tb ? b : swapLast(b),
        aa = ta ? a : swapLast(a);
      const outT = one(
        stockFunc({ inputs: { a: bb, b: aa }, backend, attrs: { ...attrs, transposeA: false, transposeB: false } }),
      );
      temps.push(outT);
      out = swapLast(outT);
      temps.pop(); // the result is returned, not disposed
    } else {
      out = stockFunc({
        inputs: { ...inputs, a: ta ? swapLast(a) : a, b: tb ? swapLast(b) : b },
        backend,
        attrs: { ...attrs, transposeA: false, transposeB: false },
      });
    }
    for (const t of temps) backend.disposeData(t.dataId);
    return out;
  });
}

function registerExplicitPadConv(tf: Tf, backendName: string, kernelName: 'Conv2D' | 'FusedConv2D'): void {
  replaceWith(tf, backendName, kernelName, (args, stockFunc) => {
    const { pad, strides, dilations, dimRoundingMode, dataFormat } = args.attrs;
    if (pad !== 'same' && typeof pad !== 'number') return stockFunc(args);
    if (!numericPadIsUniform(args.attrs, args.inputs.filter.shape)) return delegateToCpu(tf, kernelName, args);
    const info = tf.backend_util.computeConv2DInfo(
      args.inputs.x.shape as [number, number, number, number],
      args.inputs.filter.shape as [number, number, number, number],
      strides as number,
      dilations as number,
      pad,
      dimRoundingMode as 'round',
      false,
      tf.backend_util.convertConv2DDataFormat(((dataFormat as string) ?? 'NHWC') as 'NHWC'),
    );
    const p = info.padInfo;
    return stockFunc({
      ...args,
      attrs: {
        ...args.attrs,
        pad: [
          [0, 0],
          [p.top, p.bottom],
          [p.left, p.right],
          [0, 0],
        ],
      },
    });
  });
}

const stockDxBackends = new WeakMap<object, Set<string>>();

/**
 * The backends of this tfjs whose engines keep their own Conv2D input gradient (their kernel beats
 * dx-as-a-convolution).
 */
function stockConvInputGradient(tf: Tf): Set<string> {
  const key = tf.engine() as object;
  let set = stockDxBackends.get(key);
  if (!set) stockDxBackends.set(key, (set = new Set()));
  return set;
}

function registerConvGradient(tf: Tf): void {
  const stock = tf.getGradient('Conv2D');
  if (!stock) throw new Error('tandem fast gradients: tfjs has no Conv2D gradient registered');
  tf.registerGradient({
    kernelName: 'Conv2D',
    inputsToSave: ['x', 'filter'],
    gradFunc: (dy: Tensor | Tensor[], saved: Tensor[], attrs: Record<string, unknown>) => {
      const grads = stock.gradFunc(dy, saved, attrs as never);
      // e.g. native: its Conv2DBackpropInput is faster
      if (stockConvInputGradient(tf).has(tf.getBackend())) return grads;
      const [sh, sw] = pair(attrs.strides, 1);
      const [x, w] = saved as [import('@tensorflow/tfjs').Tensor4D, import('@tensorflow/tfjs').Tensor4D];
      if (!convIsCovered(attrs, w.shape) || sh !== 1 || sw !== 1) return grads;
      const [fH, fW] = w.shape;
      const info = tf.backend_util.computeConv2DInfo(
        x.shape,
        w.shape,
        1,
        1,
        attrs.pad as 'same',
        undefined,
        false,
        'channelsLast',
      );
      const p = info.padInfo;
      // dx = full correlation of dy with the spatially flipped filter, in/out channels swapped.
      const pad: [[number, number], [number, number], [number, number], [number, number]] = [
        [0, 0],
        [fH - 1 - p.top, fH - 1 - p.bottom],
        [fW - 1 - p.left, fW - 1 - p.right],
        [0, 0],
      ];
      if (pad.some(([a, b]) => a < 0 || b < 0)) return grads; // padding wider than the filter: stock path
      return {
        x: () =>
          tf.conv2d(
            dy as import('@tensorflow/tfjs').Tensor4D,
            tf.transpose(tf.reverse(w, [0, 1]), [0, 1, 3, 2]) as import('@tensorflow/tfjs').Tensor4D,
            1,
            pad,
          ),
        filter: grads.filter,
      };
    },
  } as never);
}
