/**
 * Recycles the Float32Arrays of the native kernels' outputs on this thread.
 * Every kernel output used to be a fresh Float32Array: tens of MB of external
 * memory per training step, freed only when V8 collects the wrappers, so V8
 * ran a full mark-compact ("external memory pressure") about every step on
 * each compute thread — a pause that, with several devices in lockstep, the
 * other devices wait out. Here an output array goes back to a free list of
 * its length when the backend drops the tensor's data, and the next output of
 * that length reuses it, zeroed (the same contents as `new Float32Array`).
 *
 * Safety: an array comes back only if this pool made it, it was written into
 * the backend exactly once (as the kernel's output), and the backend dropped
 * that data (reference count zero). Any other write of its buffer — a view
 * (a stock kernel's `subarray` slice), the same array wrapped again — and
 * any read through `dataSync()` (the caller may keep the array) pins it: it
 * is never recycled, the GC frees it.
 *
 * bf16 shadows: an owned output's values never change until the pool takes the
 * array back, so its bf16 rounding, once made, stands for it until then. Under
 * precision bf16 a convolution converts its activation into the shadow, and
 * the next primitive that reads the same activation (a convolution's forward
 * and weight gradient read x; its data and weight gradients read dy) reads the
 * shadow instead of converting it again. The kernels whose output a
 * convolution usually reads next (BatchNormalization's input gradient, relu,
 * a convolution's fused activation, the pool gradient) fill it as they write
 * the output (`shadowToWrite`). A shadow goes when its array is dropped (to a
 * free list of its length, for the next one) or pinned.
 */
import { takeOutputDestination } from '../output-destination.js';

type State = 'fresh' | 'owned' | 'free' | 'pinned';

/** An owned output's bf16 copy: `filled` once it holds the output rounded to bf16 (nearest even). */
export interface Bf16Shadow {
  readonly bits: Uint16Array;
  filled: boolean;
  /** The float32 array was never written: the shadow holds the values (bf16-only-outputs.ts). */
  stale?: boolean;
}

/** Arrays kept for reuse, a list per length, up to `maxElements` elements in all. */
class FreeLists<T extends { readonly length: number }> {
  private readonly lists = new Map<number, T[]>();
  private heldElements = 0;

  constructor(private readonly maxElements: number) {}

  /** Kept for reuse, or false when that would hold more than the cap (the caller leaves it to the GC). */
  give(array: T): boolean {
    if (this.heldElements + array.length > this.maxElements) return false;
    let list = this.lists.get(array.length);
    if (!list) this.lists.set(array.length, (list = []));
    list.push(array);
    this.heldElements += array.length;
    return true;
  }

  /** A kept array of `length` elements, or undefined. */
  take(length: number): T | undefined {
    const array = this.lists.get(length)?.pop();
    if (array) this.heldElements -= length;
    return array;
  }

  get held(): number {
    return this.heldElements;
  }
}

/** Where the arrays the pool makes start: a multiple of this many bytes, when it knows the addresses. */
const ALIGNMENT = 64;

export class OutputPool {
  private readonly free: FreeLists<Float32Array>;
  private readonly state = new WeakMap<ArrayBufferLike, State>();
  /** The byte offset of the array the pool made in each buffer (its whole, aligned view). */
  private readonly offsets = new WeakMap<ArrayBufferLike, number>();
  /** The bytes past a 64-byte boundary where a buffer's data starts (the native addon's), once set. */
  private misalignment?: (buffer: ArrayBuffer) => number;
  private readonly shadows = new WeakMap<ArrayBufferLike, Bf16Shadow>();
  private readonly freeShadows: FreeLists<Uint16Array>;

  /**
   * `maxFloats`: the most floats kept on the free lists, and the most bf16 elements on the shadows' (beyond that, a
   * dropped array or shadow is left to the GC).
   */
  constructor(maxFloats: number) {
    this.free = new FreeLists(maxFloats);
    this.freeShadows = new FreeLists(maxFloats);
  }

  /** From now on, arrays start on a 64-byte boundary: `misalignment` says where a buffer's data starts. */
  alignWith(misalignment: (buffer: ArrayBuffer) => number): void {
    this.misalignment = misalignment;
  }

  /** A new zeroed array of `length` elements: on a 64-byte boundary when the pool knows the addresses. */
  private make<T extends Float32Array | Uint16Array>(
    Type: { new (length: number): T; new (buffer: ArrayBuffer, offset: number, length: number): T },
    length: number,
  ): T {
    if (!this.misalignment) return new Type(length);
    const bytes = length * (Type as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;
    const buffer = new ArrayBuffer(bytes + ALIGNMENT);
    const offset = (ALIGNMENT - this.misalignment(buffer)) % ALIGNMENT;
    this.offsets.set(buffer, offset);
    return new Type(buffer, offset, length);
  }

  /**
   * An array of `length` floats for a kernel's output, a recycled one when there is one: zeroed, unless `zero` is false
   * (a kernel that writes every element: a recycled array then keeps its old values until the kernel overwrites them).
   */
  take(length: number, zero = true): Float32Array {
    const destination = takeOutputDestination(length); // a gradient's slot (output-destination.ts): not the pool's
    if (destination) return zero ? destination.fill(0) : destination;
    for (let reused = this.free.take(length); reused; reused = this.free.take(length)) {
      if (this.state.get(reused.buffer) !== 'free') continue; // pinned while on the list
      this.state.set(reused.buffer, 'fresh');
      return zero ? reused.fill(0) : reused;
    }
    const fresh = this.make(Float32Array, length);
    this.state.set(fresh.buffer, 'fresh');
    return fresh;
  }

  /**
   * The backend stores `values` as a tensor's data: the first store of a fresh output owns it; any other pins its
   * buffer.
   */
  stored(values: unknown): void {
    if (!ArrayBuffer.isView(values)) return;
    const s = this.state.get(values.buffer);
    if (s === undefined || s === 'pinned') return;
    const offset = this.offsets.get(values.buffer) ?? 0;
    const whole =
      values instanceof Float32Array &&
      values.byteOffset === offset &&
      values.byteLength === values.buffer.byteLength - (this.offsets.has(values.buffer) ? ALIGNMENT : 0);
    const next = s === 'fresh' && whole ? 'owned' : 'pinned';
    if (next === 'pinned') this.shadows.delete(values.buffer);
    this.state.set(values.buffer, next);
  }

  /**
   * `values` was handed out (`dataSync()`): the caller may keep it past the tensor, so its buffer is never recycled.
   */
  pin(values: unknown): void {
    if (!ArrayBuffer.isView(values) || !this.state.has(values.buffer)) return;
    this.state.set(values.buffer, 'pinned');
    this.shadows.delete(values.buffer); // the caller may write the array
  }

  /** The bf16 shadow of an output this pool owns (made empty on first ask), or undefined for any other array. */
  shadowOf(values: Float32Array): Bf16Shadow | undefined {
    return this.state.get(values.buffer) === 'owned' ? this.shadowMade(values) : undefined;
  }

  /**
   * The shadow a kernel fills as it writes `values`: an output this pool owns, or a fresh one it just made, which the
   * backend stores next (owned: the shadow stays; pinned: it goes). Undefined for any other array.
   */
  shadowToWrite(values: Float32Array): Bf16Shadow | undefined {
    const s = this.state.get(values.buffer);
    return s === 'owned' || s === 'fresh' ? this.shadowMade(values) : undefined;
  }

  private shadowMade(values: Float32Array): Bf16Shadow {
    let shadow = this.shadows.get(values.buffer);
    if (!shadow) {
      shadow = { bits: this.freeShadows.take(values.length) ?? this.make(Uint16Array, values.length), filled: false };
      this.shadows.set(values.buffer, shadow);
    }
    return shadow;
  }

  private releaseShadow(values: Float32Array): void {
    const shadow = this.shadows.get(values.buffer);
    if (!shadow) return;
    this.shadows.delete(values.buffer);
    this.freeShadows.give(shadow.bits); // beyond the cap: left to the GC
  }

  /** The backend dropped data holding `values`: kept for reuse if it is an output this pool owns. */
  dropped(values: unknown): void {
    if (!(values instanceof Float32Array) || this.state.get(values.buffer) !== 'owned') return;
    this.releaseShadow(values);
    this.state.set(values.buffer, this.free.give(values) ? 'free' : 'pinned');
  }

  /** Floats on the free lists now. */
  get held(): number {
    return this.free.held;
  }
}

/** This thread's pool (the native backend and its kernels share it): up to 64 MiB of outputs, 32 MiB of shadows. */
export const OUTPUT_POOL = new OutputPool(16 * 2 ** 20);
