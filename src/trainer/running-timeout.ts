/**
 * A timeout that counts only the time this process ran: a plain setTimeout counts wall time, so a process stopped
 * (SIGSTOP, a suspended VM) past it fires the moment it resumes, before the work it waited for (on threads that were
 * stopped too) had a chance to finish. Ticks every `TICK_MS`; a gap between ticks longer than two ticks is the process
 * not running and counts as one tick.
 *
 * @example
 * const stop = runningTimeout(3000, () => reject(stalled)); // … stop() once the work is done
 */
const TICK_MS = 100;

/** Calls `onExpire` once `ms` of running time have passed; returns the function that cancels it. */
export function runningTimeout(ms: number, onExpire: () => void): () => void {
  let ran = 0;
  let last = performance.now();
  const timer = setInterval(
    () => {
      const now = performance.now();
      ran += Math.min(now - last, 2 * TICK_MS);
      last = now;
      if (ran >= ms) {
        clearInterval(timer);
        onExpire();
      }
    },
    Math.min(TICK_MS, Math.max(1, ms)),
  );
  timer.unref();
  return () => clearInterval(timer);
}
