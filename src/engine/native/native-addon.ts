/**
 * The optional native addon (native/, built by node-gyp at install when
 * oneDNN's headers are present: Debian's libdnnl-dev). Loaded once per thread;
 * when it is missing, `loadNativeAddon` says why instead of throwing.
 *
 * Every function works in place on Float32Arrays (ArrayBuffer- or
 * SharedArrayBuffer-backed) and throws a TypeError/RangeError naming the
 * argument when one is too short.
 */
import { fileURLToPath } from 'node:url';
import { TandemError } from '../../errors.js';
import { loadAddonAt, REBUILD_COMMAND, type AddonLoad } from '../../addon-load.js';

/** Fused activation codes, as native/src/dnnl-context.h numbers them. */
export const NATIVE_ACTIVATIONS = { linear: 0, relu: 1, relu6: 2, leakyrelu: 3, sigmoid: 4, elu: 5 } as const;
export type NativeActivation = keyof typeof NATIVE_ACTIVATIONS;

/** [N,H,W,C, KH,KW,OC, strideH,strideW, padTop,padLeft,padBottom,padRight, outH,outW] */
export type NativeConvShape = readonly number[];
/** [N,H,W,C, filterH,filterW, strideH,strideW, padTop,padLeft, outH,outW] */
export type NativePoolShape = readonly number[];
type F32 = Float32Array;

/** A shadow's state as the kernels take it: false or 0 empty, true or 1 filled, 2 filled with float32 stale. */
export type ShadowState = boolean | number;

export interface NativeAddon {
  setNumThreads(threads: number): void;
  getNumThreads(): number;
  /** How many bytes past a 64-byte boundary the buffer's data starts (output-pool.ts aligns its arrays by it). */
  misalignment(buffer: ArrayBuffer): number;
  /** glibc mallopt: keep freed blocks up to these sizes for reuse (process-wide). True when both were accepted. */
  retainFreedMemory(mmapThresholdBytes: number, trimThresholdBytes: number): boolean;
  version(): { onednn: string; cpuRuntime: string };
  /** oneDNN primitives this thread has created (cached per shape: stays flat in steady state). */
  primitivesCreated(): number;
  /**
   * What this thread's convolutions and matmuls multiply in. bf16: inputs rounded to bf16 (nearest even), products
   * accumulated and written in float32; a shape oneDNN has no bf16 kernel for runs in float32.
   */
  setPrecision(precision: 'fp32' | 'bf16'): void;
  getPrecision(): 'fp32' | 'bf16';
  /** oneDNN's effective ISA and its implementation for a small bf16 matmul ('' and the reason when it has none). */
  bf16Support(): { isa: string; implementation: string; reason?: string };
  /**
   * dst = src rounded to bf16 as the convolutions' casts round (nearest even, a subnormal to a zero of its sign, NaN
   * made quiet): by AVX512-BF16's instruction where the CPU has it ('auto'), or by integer steps ('portable'). Returns
   * the path taken. For tests: both paths must give the same bits.
   */
  castToBf16(src: F32, dst: Uint16Array, path: 'auto' | 'portable'): 'instruction' | 'portable';
  /** out = bits widened to float32 (exact), over bits' length: a bf16-only output's values (bf16-only-outputs.ts). */
  widenBf16(bits: Uint16Array, out: F32): void;
  /** Names the calling OS thread (cut to 15 bytes); absent in a build older than it (src/engine/thread-name.ts). */
  nameThread?(name: string): boolean;
  /** oneDNN's implementation string of each cached primitive on this thread, by kernel key. */
  implementations(): Record<string, string>;
  /**
   * The convolutions take an activation's bf16 shadow (output-pool.ts) after it, with whether it is filled: in bf16,
   * where oneDNN reads the activation in its own layout, the shadow is read (filled first if it was not) in place of a
   * conversion of its own. They return which shadows hold their activation afterwards (bit 0: x, or dy for the data
   * gradient; bit 1: dy of the weight gradient).
   */
  conv2dForward(
    x: F32,
    filter: F32,
    bias: F32 | null,
    y: F32,
    shape: NativeConvShape,
    activation: number,
    alpha: number,
    xShadow?: Uint16Array | null,
    xShadowFilled?: ShadowState,
    /** y's bf16 bits, written in the activation's pass (a convolution reads them next). */
    yShadow?: Uint16Array | null,
  ): number;
  conv2dBackwardData(
    dy: F32,
    filter: F32,
    dx: F32,
    shape: NativeConvShape,
    dyShadow?: Uint16Array | null,
    dyShadowFilled?: ShadowState,
  ): number;
  conv2dBackwardWeights(
    x: F32,
    dy: F32,
    dw: F32,
    dbias: F32 | null,
    shape: NativeConvShape,
    xShadow?: Uint16Array | null,
    xShadowFilled?: ShadowState,
    dyShadow?: Uint16Array | null,
    dyShadowFilled?: ShadowState,
  ): number;
  matmul(
    a: F32,
    b: F32,
    bias: F32 | null,
    c: F32,
    batchA: number,
    batchB: number,
    m: number,
    k: number,
    n: number,
    transposeA: boolean,
    transposeB: boolean,
    activation: number,
    alpha: number,
    /** bf16 shadows of a and b (see conv2dForward); returns bit 0 when a's holds a afterwards, bit 1 for b's. */
    aShadow?: Uint16Array | null,
    aShadowFilled?: ShadowState,
    bShadow?: Uint16Array | null,
    bShadowFilled?: ShadowState,
  ): number;
  maxPool(x: F32, y: F32, shape: NativePoolShape): void;
  /** dx written whole; `reluOfX`: x is a relu's output and dx also gets relu's derivative (TandemMaxPoolReluGrad). */
  maxPoolGrad(dy: F32, x: F32, dx: F32, shape: NativePoolShape, reluOfX?: boolean): void;
  /** MaxPool of windows that tile x, recording each window's winning cell per channel (-1 none, -2 holds a NaN). */
  maxPoolWinners(x: F32, y: F32, winners: Int8Array, shape: NativePoolShape): void;
  /**
   * maxPoolGrad(dy, x, dx, shape, true) from the winners maxPoolWinners recorded (y: its output); without x, a window
   * holding a NaN gets NaN. dxShadow: dx in bf16 too (rounded as oneDNN rounds), in the same pass.
   */
  maxPoolReluGradWinners(
    dy: F32,
    x: F32 | null,
    y: F32,
    winners: Int8Array,
    /** null with dxShadow: dx in bf16 alone */
    dx: F32 | null,
    shape: NativePoolShape,
    dxShadow?: Uint16Array,
  ): void;
  /**
   * Precision bf16: relu(conv(x) + bias) in bf16 (never written in float32), max-pooled by poolSize windows that tile
   * it: y and its bf16 bits (yShadow), the winners as maxPoolWinners records them. Returns 1 when xShadow holds x.
   */
  conv2dReluMaxPool(
    x: F32,
    filter: F32,
    bias: F32 | null,
    y: F32,
    yShadow: Uint16Array,
    winners: Int8Array,
    shape: NativeConvShape,
    poolSize: [number, number],
    xShadow?: Uint16Array | null,
    xShadowFilled?: ShadowState,
  ): number;
  /** yShadow (and reluGrad's dxShadow): the output's bf16 bits, written in the same pass (the casts' rounding). */
  relu(x: F32, y: F32, size: number, yShadow?: Uint16Array | null): void;
  reluGrad(dy: F32, x: F32, dx: F32 | null, size: number, dxShadow?: Uint16Array | null): void;
  /** Dropout's multiplier into `out`, as seeded-random-layers.ts's dropoutMultiplier draws it (the same bits). */
  dropoutMask(out: F32, base: number, lo: number, kept: number): void;
  addRowVector(x: F32, v: F32, y: F32, rows: number, cols: number): void;
  sumRows(x: F32, out: F32, rows: number, cols: number): void;
  /**
   * out (shape, row-major) = a ∘ b, operands walked with their strides (0: broadcast): op 0 +, 1 −, 2 ×, 3 ÷,
   * 4 Math.min, 5 Math.max into a Float32Array; 6 >, 7 >=, 8 <, 9 <=, 10 == into a Uint8Array (tfjs's bool).
   */
  binaryStrided(
    op: number,
    out: F32 | Uint8Array,
    a: F32,
    aStrides: number[],
    b: F32,
    bStrides: number[],
    shape: number[],
  ): void;
  /** out[o] = Σ x (shape) at offset o by outStrides, in double; mean: each element ÷ count first (tfjs's Mean). */
  reduceStrided(
    mean: boolean,
    x: F32,
    shape: number[],
    outStrides: number[],
    out: F32,
    outSize: number,
    count: number,
  ): void;
  /** out[start, end) = mean of the slots there, summed in float32 in slot order (as `reduceMeanInto`). */
  reduceMean(slots: readonly F32[], out: F32, start: number, end: number): void;
  /** The index of the first NaN or ±Infinity of `values`, or -1 (as backward-pass.ts's `firstNonFinite`). */
  firstNonFinite(values: F32): number;
  /** src copied into dst from `offset` (streamed past the caches on AVX-512), and firstNonFinite(src). */
  copyFinite(src: F32, dst: F32, offset: number): number;
  /** tfjs's sgd (acc null) or momentum update of [start, end), as `applyUpdate`. */
  sgdUpdate(params: F32, grads: F32, acc: F32 | null, start: number, end: number, lr: number, momentum: number): void;
  /** tfjs's adam update of [start, end), as `applyUpdate`; c1, c2 = 1 - fround(beta^step). */
  adamUpdate(
    params: F32,
    grads: F32,
    m: F32,
    v: F32,
    start: number,
    end: number,
    lr: number,
    beta1: number,
    beta2: number,
    epsilon: number,
    c1: number,
    c2: number,
  ): void;
  /**
   * The fp16/bf16 hooks' `compressWithFeedback` in one pass, the same bits (corrected may be null without a residual).
   */
  halfCompress(
    format: 'fp16' | 'bf16',
    gradient: F32,
    residual: F32 | null,
    corrected: F32 | null,
    sent: F32,
    packed: F32,
  ): void;
  /**
   * `meanOfDecoded`: out = the mean of the ranks' codes in `gathered`, summed in float32 in rank order, the same bits.
   */
  halfMeanDecoded(format: 'fp16' | 'bf16', gathered: F32, ranks: number, out: F32): void;
  /** BatchNormalization's training loops (src/model/batch-norm-loops.ts): the same bits as the JS loops. */
  bnChannelSums(x: F32, outer: number, channels: number, inner: number, sums: Float64Array): void;
  /** Channels last (inner 1, else a RangeError): [Σx, Σx²] per channel in one pass, in double. */
  bnChannelMoments(x: F32, outer: number, channels: number, inner: number, sums: Float64Array): void;
  bnCenteredSquareSums(x: F32, mean: F32, outer: number, channels: number, inner: number, sums: Float64Array): void;
  bnNormalize(
    x: F32,
    mean: F32,
    scale: Float64Array,
    beta: F32,
    outer: number,
    channels: number,
    inner: number,
    y: F32,
    /** relu(y): the relu layer after it, fused in. */
    relu?: boolean,
  ): void;
  /** `z`: a fused relu's output (dy is then the relu's output gradient); also bnInputGradient's. */
  bnGradientSums(
    dy: F32,
    x: F32,
    mean: F32,
    invStd: Float64Array,
    outer: number,
    channels: number,
    inner: number,
    sums: Float64Array,
    z?: F32 | null,
  ): void;
  bnInputGradient(
    dy: F32,
    x: F32,
    mean: F32,
    invStd: Float64Array,
    gamma: F32,
    sums: F32,
    n: number,
    outer: number,
    channels: number,
    inner: number,
    dx: F32,
    z?: F32 | null,
    /** dx's bf16 bits, written in the same pass (as relu's yShadow). */
    dxShadow?: Uint16Array | null,
  ): void;
}

export type NativeAddonLoad = AddonLoad<NativeAddon>;

// This file runs from dist/src/engine/native/: the addon is built in <package>/native/build/Release/.
const DEFAULT_PATH = fileURLToPath(new URL('../../../../native/build/Release/tandem_native.node', import.meta.url));
const EXPORTS: (keyof NativeAddon)[] = [
  'setNumThreads',
  'getNumThreads',
  'misalignment',
  'retainFreedMemory',
  'version',
  'primitivesCreated',
  'setPrecision',
  'getPrecision',
  'bf16Support',
  'castToBf16',
  'widenBf16',
  'implementations',
  'conv2dForward',
  'conv2dBackwardData',
  'conv2dBackwardWeights',
  'matmul',
  'maxPool',
  'maxPoolGrad',
  'maxPoolWinners',
  'maxPoolReluGradWinners',
  'conv2dReluMaxPool',
  'relu',
  'reluGrad',
  'dropoutMask',
  'addRowVector',
  'sumRows',
  'binaryStrided',
  'reduceStrided',
  'reduceMean',
  'sgdUpdate',
  'adamUpdate',
  'firstNonFinite',
  'copyFinite',
  'halfCompress',
  'halfMeanDecoded',
  'bnChannelSums',
  'bnChannelMoments',
  'bnCenteredSquareSums',
  'bnNormalize',
  'bnGradientSums',
  'bnInputGradient',
];

let cached: NativeAddonLoad | undefined;

/** How to get the native path, for messages. */
export const NATIVE_HOW_TO = `install oneDNN (Debian/Ubuntu: apt-get install libdnnl-dev) and run ${REBUILD_COMMAND}`;

/** Loads the addon (once per thread). `TANDEM_NATIVE_ADDON` overrides its path. */
export function loadNativeAddon(): NativeAddonLoad {
  if (cached) return cached;
  const path = process.env.TANDEM_NATIVE_ADDON || DEFAULT_PATH;
  cached = loadAddonAt<NativeAddon>('native', path, addon => {
    const missing = EXPORTS.filter(name => typeof addon[name] !== 'function');
    return missing.length > 0 ? `missing ${missing.join(', ')}` : undefined;
  });
  return cached;
}

/** The addon, or BACKEND_UNAVAILABLE saying why it is missing and how to get it. */
export function requireNativeAddon(): NativeAddon {
  const load = loadNativeAddon();
  if (!load.loaded) {
    throw new TandemError(
      'BACKEND_UNAVAILABLE',
      `backend 'native' is not available: ${load.reason}. To get it, ${NATIVE_HOW_TO}; or use --backend wasm.`,
    );
  }
  return load.addon;
}
