/**
 * The fp16/bf16 hooks' per-element passes on the comm thread — the
 * compression with error feedback, and the mean of the gathered codes — as
 * one swappable pair: the JS loops (pipeline/hooks/half-float.ts), or the
 * native addon's one-pass C++ whenever the addon loads, on any backend (the
 * comm thread's work, not the engine's). Both give the same bits (tested
 * against each other, NaN, Infinity, subnormals and rounding ties included),
 * so which one runs never changes a gradient.
 */
import { loadNativeAddon, requireNativeAddon } from '../engine/native/native-addon.js';
import { compressWithFeedback, meanOfDecoded, type HalfFormat } from '../pipeline/hooks/half-float.js';

export interface HalfArithmetic {
  readonly name: 'js' | 'native';
  /** `compressWithFeedback`: packed = codes of gradient (+ residual), sent = their values, the residual updated. */
  compress(
    format: HalfFormat,
    gradient: Float32Array,
    residual: Float32Array | undefined,
    corrected: Float32Array,
    sent: Float32Array,
    packed: Float32Array,
  ): void;
  /** `meanOfDecoded`: out = the mean over `size` ranks of their codes in `gathered`. */
  meanDecoded(format: HalfFormat, gathered: Float32Array, size: number, out: Float32Array): void;
}

/**
 * 'auto': the addon's when it loads, the JS loops otherwise; 'js' forces the loops (tests, benches); 'native' requires
 * the addon.
 */
export type HalfArithmeticChoice = 'auto' | 'js' | 'native';

export const JS_HALF_ARITHMETIC: HalfArithmetic = {
  name: 'js',
  compress: compressWithFeedback,
  meanDecoded: meanOfDecoded,
};

/** The addon's passes (throws BACKEND_UNAVAILABLE, with the fix, when the addon did not load). */
export function nativeHalfArithmetic(): HalfArithmetic {
  const addon = requireNativeAddon();
  return {
    name: 'native',
    compress: (format, gradient, residual, corrected, sent, packed) =>
      addon.halfCompress(format, gradient, residual ?? null, corrected, sent, packed),
    meanDecoded: (format, gathered, size, out) => addon.halfMeanDecoded(format, gathered, size, out),
  };
}

let auto: HalfArithmetic | undefined;

export function halfArithmetic(choice: HalfArithmeticChoice): HalfArithmetic {
  switch (choice) {
    case 'js':
      return JS_HALF_ARITHMETIC;
    case 'native':
      return nativeHalfArithmetic();
    case 'auto':
      return (auto ??= loadNativeAddon().loaded ? nativeHalfArithmetic() : JS_HALF_ARITHMETIC);
    default: {
      const never: never = choice;
      throw new Error(`unknown half arithmetic ${String(never)}`);
    }
  }
}
