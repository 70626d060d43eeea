/**
 * Arithmetic on flat parameter ranges — the mean of an all-reduce and the
 * optimizer update, on the comm threads (and a classifier head's update on
 * the compute thread) — as one swappable pair: the JS loops,
 * or the native addon's vectorised C++ (the `native` engine's). Both give
 * the same bits (the same operations in the same order and precision; tested
 * against each other), so which one runs never changes a parameter.
 * The addon has loops for sgd (momentum) and adam only (their `nativeUpdate`):
 * the other optimizers run their JS loops on every engine, so they too give
 * the same bits whichever arithmetic runs.
 */
import { requireNativeAddon } from '../engine/native/native-addon.js';
import { applyUpdate, optimizerStep, type OptimizerConfig } from './flat-optimizer.js';
import { optimizerOfKind } from './optimizer-registry.js';
import { reduceMeanInto } from '../collectives/reduce-slots.js';
import type { SlotReducer } from '../collectives/collective.js';

/** The reduction (`SlotReducer`) and the optimizer update. */
export interface FlatArithmetic extends SlotReducer {
  readonly name: 'js' | 'native';
  /** One optimizer update of params[start, end); `step` counts from 1. */
  applyUpdate(
    config: OptimizerConfig,
    params: Float32Array,
    grads: Float32Array,
    state: Float32Array[],
    start: number,
    end: number,
    step: number,
  ): void;
  /** src rounded to bf16 into dst (the native addon's cast: the bits its kernels cast to); absent in JS. */
  castToBf16?(src: Float32Array, dst: Uint16Array): void;
}

export const JS_ARITHMETIC: FlatArithmetic = { name: 'js', reduceMeanInto, applyUpdate };

/** The addon's loops (throws BACKEND_UNAVAILABLE, with the fix, when the addon did not load). */
export function nativeArithmetic(): FlatArithmetic {
  const addon = requireNativeAddon();
  return {
    name: 'native',
    reduceMeanInto(slots, out, start, end) {
      if (slots.length === 1)
        reduceMeanInto(slots, out, start, end); // a copy at most: the JS one
      else if (end > start) addon.reduceMean(slots, out, start, end);
    },
    applyUpdate(config, params, grads, state, start, end, runStep) {
      const optimizer = optimizerOfKind(config.kind);
      const step = optimizerStep(config, runStep);
      if (optimizer.nativeUpdate)
        optimizer.nativeUpdate(addon, config as never, params, grads, state, start, end, step);
      else optimizer.update(config as never, params, grads, state, start, end, step); // no C++ loop: the same bits
    },
    castToBf16(src, dst) {
      addon.castToBf16(src, dst, 'auto');
    },
  };
}
