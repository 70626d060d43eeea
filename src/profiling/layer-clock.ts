/**
 * The profiler's clock: what a layer's time is measured in, chosen so that a
 * busy machine does not skew it.
 *
 * - `thread-cpu`: on-CPU time of the calling thread, for engines whose kernels
 *   run on it (wasm, cpu, native with one OpenMP thread). Linux's
 *   `/proc/thread-self/schedstat` (first field: ns on CPU) read on the thread
 *   that computes. The kernel refreshes that field only at scheduler ticks
 *   (4 ms here) unless something asks for the running thread's exact runtime:
 *   `getrusage(RUSAGE_SELF)` does (it updates the caller's runtime first), so
 *   each reading calls `process.cpuUsage()` and then reads the file —
 *   measured: a fresh value at every read, steps of ~4 µs, instead of 4 ms.
 *   Time the thread waits for a core while other processes run is not counted.
 * - `process-cpu`: CPU time of every thread of the process
 *   (`process.cpuUsage()`, µs), for engines that compute on their own threads
 *   (native with several OpenMP threads, tfjs-node): the calling thread's time
 *   would miss their work. It also counts V8's helper threads and spinning
 *   pool threads, so it is the second choice.
 * - `wall`: `performance.now()`, for accelerators (their work is not CPU time),
 *   and the last fallback. Load skews it.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import type { KernelSite } from '../engine/engine.js';
import { TandemError } from '../errors.js';

export type ClockKind = 'thread-cpu' | 'process-cpu' | 'wall';

export interface LayerClock {
  kind: ClockKind;
  /** Why this clock, in one sentence (the report prints it). */
  reason: string;
  /** Milliseconds on this clock; only differences mean anything. */
  nowMs(): number;
  close(): void;
}

const SCHEDSTAT = '/proc/thread-self/schedstat';

/** The clock for an engine whose kernels run at `site`. Call it on the thread that computes. */
export function layerClock(site: KernelSite): LayerClock {
  switch (site) {
    case 'calling-thread': {
      const thread = threadCpuClock();
      return thread.ok
        ? thread.clock
        : processCpuClock(`the thread's CPU time is unavailable (${thread.why}); process CPU time instead`);
    }
    case 'engine-threads':
      return processCpuClock('the engine computes on threads of its own: CPU time of every thread of the process');
    case 'accelerator':
      return wallClock('the engine computes on an accelerator, whose work is not CPU time: wall clock (load skews it)');
    default: {
      const never: never = site;
      throw new Error(`unknown kernel site ${String(never)}`);
    }
  }
}

type Probe = { ok: true; clock: LayerClock } | { ok: false; why: string };

/** The calling thread's CPU time, when this OS offers it with a fresh value at each read. */
function threadCpuClock(): Probe {
  let fd: number;
  try {
    fd = openSync(SCHEDSTAT, 'r'); // bound to the thread that opens it
  } catch (err) {
    return { ok: false, why: `${SCHEDSTAT} cannot be opened: ${(err as Error).message}` };
  }
  const buffer = Buffer.alloc(128);
  const readNs = (): number => {
    process.cpuUsage(); // getrusage: refreshes this thread's runtime in the kernel
    const n = readSync(fd, buffer, 0, buffer.length, 0);
    return Number(buffer.toString('latin1', 0, n).split(' ')[0]);
  };
  const clock: LayerClock = {
    kind: 'thread-cpu',
    reason: `the engine computes on the calling thread: that thread's CPU time (${SCHEDSTAT})`,
    nowMs: () => readNs() / 1e6,
    close: () => closeSync(fd),
  };
  const advances = probeAdvances(clock);
  if (advances !== undefined) {
    clock.close();
    return { ok: false, why: advances };
  }
  return { ok: true, clock };
}

/**
 * Undefined when `clock` advances with this thread's work in sub-millisecond
 * steps; else why not. The smallest of 5 steps counts: the first readings also
 * pay for compiling the reading code.
 */
function probeAdvances(clock: LayerClock): string | undefined {
  let step = Infinity;
  for (let trial = 0; trial < 5; trial++) {
    const t0 = clock.nowMs(),
      w0 = performance.now();
    let t1 = t0;
    while (t1 === t0 && performance.now() - w0 < 20) t1 = clock.nowMs();
    if (!Number.isFinite(t0) || !(t1 > t0)) return `it did not advance over 20 ms of work (${t0} -> ${t1})`;
    step = Math.min(step, t1 - t0);
  }
  return step > 0.5 ? `it advances in steps of ${step.toFixed(1)} ms` : undefined;
}

function processCpuClock(reason: string): LayerClock {
  return {
    kind: 'process-cpu',
    reason,
    nowMs: () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1e3;
    },
    close: () => undefined,
  };
}

function wallClock(reason: string): LayerClock {
  return { kind: 'wall', reason, nowMs: () => performance.now(), close: () => undefined };
}

/** A clock of `kind` chosen by the caller (to compare: `wall` shows what load does to a wall-clock profile). */
export function clockOfKind(kind: ClockKind): LayerClock {
  switch (kind) {
    case 'thread-cpu': {
      const thread = threadCpuClock();
      if (!thread.ok) throw new TandemError('BAD_CONFIG', `the thread-cpu clock is unavailable here: ${thread.why}`);
      return { ...thread.clock, reason: `the calling thread's CPU time (${SCHEDSTAT}), as asked` };
    }
    case 'process-cpu':
      return processCpuClock('CPU time of every thread of the process, as asked');
    case 'wall':
      return wallClock('wall clock, as asked (load skews it)');
    default: {
      const never: never = kind;
      throw new Error(`unknown clock ${String(never)}`);
    }
  }
}
