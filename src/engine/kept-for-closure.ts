/**
 * Tensors a gradient closure kept for a later closure of the same node (a convolution's bias gradient, made by the
 * filter gradient's kernel): the later one releases it (`releaseKept`) once it has its own tensor on the data, or the
 * backward walk releases whatever is left when it ends (a closure it did not call: a frozen bias).
 */
import type { Tensor } from './tfjs-types.js';

const KEPT = new Set<Tensor>();

/** `t` (kept: `tf.keep`) held for a later closure, disposed at the latest when the backward walk running now ends. */
export function keepForLaterClosure(t: Tensor): void {
  KEPT.add(t);
}

/** The later closure is done with `t`: released now. */
export function releaseKept(t: Tensor): void {
  KEPT.delete(t);
  t.dispose();
}

/** The walk has ended: every tensor still kept released. */
export function releaseAllKept(): void {
  for (const t of KEPT) if (!t.isDisposed) t.dispose();
  KEPT.clear();
}
