/**
 * tfjs's cpu backend greets its first tensor in Node with "install our node
 * backend (tfjs-node)": advice that does not apply to tandem (tfjs-node is
 * never a dependency; `native` is the fast path), printed once per thread
 * that uses the cpu backend (a `--backend cpu` device, the main thread's
 * check of a model module). The native engine's cpu subclass mutes it the
 * same way.
 */
import type { Tf } from './tfjs-types.js';

/** Mutes the greeting of `tf`'s current backend, if it is tfjs's cpu backend and has not greeted yet. */
export function muteCpuGreeting(tf: Tf): void {
  const backend = tf.backend() as unknown as { firstUse?: unknown };
  if (typeof backend.firstUse === 'boolean') backend.firstUse = false;
}

/** This thread's tfjs on the cpu backend, without the greeting. */
export async function useQuietCpu(tf: Tf): Promise<void> {
  if (tf.getBackend() !== 'cpu') await tf.setBackend('cpu');
  muteCpuGreeting(tf);
}
