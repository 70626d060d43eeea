/**
 * Where the next kernel output of a given length goes: a variable's slot in the shared gradient layout. The backward
 * walk (gradient-tape.ts) names the slot around the one gradient function that makes a variable's final gradient; the
 * native backend's output pool hands it to the first kernel output of exactly its length, so the kernel writes the
 * gradient where the comm thread reads it and the hand-over copies nothing (alexnet-mini's and mnist-node's 2.3 MB a
 * step). An intermediate output of the same length may take it instead: the hand-over then finds the gradient in
 * another array and copies it over the slot, as it always did. The slot is never a pool array: nothing recycles it.
 *
 * @example
 * const dx = withOutputDestination(slot, () => gradientOf(x)); // dx's values are `slot` when a kernel took it
 */
let next: Float32Array | undefined;

/** Runs `f` with `target` offered to the first kernel output of exactly its length; `f` takes it or not. */
export function withOutputDestination<T>(target: Float32Array, f: () => T): T {
  next = target;
  try {
    return f();
  } finally {
    next = undefined;
  }
}

/**
 * A replayed step's offer (../actors/step-replay.ts): `target` offered from the mark where the recorded walk offered
 * its slot to the mark where it stopped (undefined: stopped).
 */
export function offerOutputDestination(target: Float32Array | undefined): void {
  next = target;
}

/** The destination offered for an output of `length` floats (then no longer offered), or undefined. */
export function takeOutputDestination(length: number): Float32Array | undefined {
  if (next === undefined || next.length !== length) return undefined;
  const target = next;
  next = undefined;
  return target;
}
