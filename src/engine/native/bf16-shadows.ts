/**
 * The bf16 shadows a kernel can read in place of converting an input again (precision bf16): an activation's, kept by
 * the output pool (output-pool.ts) while its values cannot change, and a weight's, kept here for one training step's
 * passes. A weight's values do not change between a layer's forward and its backward within a step (its update waits
 * for its gradient, and the next forward waits for the update), so the matmul that casts fc1's 2 MB weight for the
 * forward hands the same bits to the data gradient, which cast it again (~0.2 ms a step on alexnet-mini and
 * mnist-node). Outside a step's scope no weight has a shadow: validation and user code convert as before.
 *
 * In training the comm thread keeps the parameters' bf16 copy, written after each group's update while the values are
 * in its cache (actors/params-mirror.ts): a weight whose range it holds for this step reads the copy, and no pass of
 * the step casts it (mnist-node's fc1, 2 MB: its forward's p50 2.15–2.25 → 2.09–2.11 ms).
 *
 * @example
 * const end = WEIGHT_SHADOWS.begin(weightArrays); // the step's passes run
 * end();
 */
import type { NativeKernelContext } from './native-kernel.js';
import { OUTPUT_POOL, type Bf16Shadow } from './output-pool.js';

/**
 * A device's parameters in bf16 as its comm thread wrote them after each group's update (actors/params-mirror.ts), for
 * one step: `holds(start, end)` says whether bits[start, end) is params[start, end) rounded to bf16 now.
 */
export interface ParamsMirror {
  params: Float32Array;
  bits: Uint16Array;
  holds(start: number, end: number): boolean;
}

/**
 * Shadows by the memory they shadow (buffer, byte offset, length), not by array object: the trainer hands a variable
 * a new view of the same shared parameters before each forward (actors/replica-model.ts writeVariable).
 */
class WeightShadows {
  private readonly shadows = new Map<ArrayBufferLike, Map<number, Bf16Shadow>>();
  private scoped = false;
  private mirror: ParamsMirror | undefined;
  /** The copy's views handed out this step, by the weight's first index. */
  private readonly mirrored = new Map<number, Bf16Shadow>();

  /**
   * The step's passes begin: `weights` (the arrays the kernels will see) keep their values until the returned end;
   * `mirror`: the parameters' bf16 copy, read where it holds a weight.
   */
  begin(weights: readonly Float32Array[], mirror?: ParamsMirror): () => void {
    this.mirror = mirror;
    this.mirrored.clear();
    const kept = new Set<Bf16Shadow>();
    for (const w of weights) {
      const at = this.shadows.get(w.buffer) ?? new Map<number, Bf16Shadow>();
      this.shadows.set(w.buffer, at);
      let s = at.get(w.byteOffset);
      if (!s || s.bits.length !== w.length)
        at.set(w.byteOffset, (s = { bits: new Uint16Array(w.length), filled: false }));
      s.filled = false;
      kept.add(s);
    }
    for (const [buffer, at] of this.shadows) {
      for (const [offset, s] of at) if (!kept.has(s)) at.delete(offset); // a weight the model no longer has
      if (at.size === 0) this.shadows.delete(buffer);
    }
    this.scoped = true;
    return () => {
      this.scoped = false;
      this.mirror = undefined;
      this.mirrored.clear();
      for (const s of kept) s.filled = false;
    };
  }

  shadowOf(values: Float32Array): Bf16Shadow | undefined {
    if (!this.scoped) return undefined;
    const s = this.shadows.get(values.buffer)?.get(values.byteOffset);
    if (!s || s.bits.length !== values.length) return undefined;
    return (!s.filled && this.mirrorOf(values)) || s;
  }

  /** The copy's view of `values` when the mirror holds them now (asked when a kernel reads the weight). */
  private mirrorOf(values: Float32Array): Bf16Shadow | undefined {
    const m = this.mirror;
    if (!m || values.buffer !== m.params.buffer) return undefined;
    const start = (values.byteOffset - m.params.byteOffset) / values.BYTES_PER_ELEMENT;
    const end = start + values.length;
    if (!Number.isInteger(start) || start < 0 || end > m.params.length) return undefined;
    let view = this.mirrored.get(start);
    if (!view) {
      if (!m.holds(start, end)) return undefined;
      view = { bits: m.bits.subarray(start, end), filled: true };
      this.mirrored.set(start, view);
    }
    return view;
  }
}

/** This thread's weight shadows (the native backend's kernels read them). */
export const WEIGHT_SHADOWS = new WeightShadows();

/** The activation's bf16 shadow (output-pool.ts) under precision bf16, else none. */
export function activationShadow(ctx: NativeKernelContext, values: Float32Array): Bf16Shadow | undefined {
  return ctx.addon.getPrecision() === 'bf16' ? OUTPUT_POOL.shadowOf(values) : undefined;
}

/** The shadow of a kernel's fresh output, which the kernel fills as it writes it, under precision bf16; else none. */
export function outputShadow(ctx: Pick<NativeKernelContext, 'addon'>, values: Float32Array): Bf16Shadow | undefined {
  return ctx.addon.getPrecision() === 'bf16' ? OUTPUT_POOL.shadowToWrite(values) : undefined;
}

/** The weight's bf16 shadow under precision bf16 within a step's scope, else none. */
export function weightShadow(ctx: NativeKernelContext, values: Float32Array): Bf16Shadow | undefined {
  return ctx.addon.getPrecision() === 'bf16' ? WEIGHT_SHADOWS.shadowOf(values) : undefined;
}

/** The addon's answer for a shadow: filled when its bit is set. */
export function settle(s: Bf16Shadow | undefined, filledBits: number, bit: number): void {
  if (s) s.filled = (filledBits & bit) !== 0;
}
