/**
 * A worker thread that reaches its V8 heap limit is ended by Node, not the process: the worker's `error` is
 * ERR_WORKER_OUT_OF_MEMORY ("Worker terminated due to reaching memory limit: JS heap out of memory"), then it
 * exits with code 1. Its failure says so in words: which thread, that it ran out of memory, and the fixes.
 */
import { getHeapStatistics } from 'node:v8';

/** Node's error for a worker thread ended at its heap limit. */
export function isWorkerOutOfMemory(err: unknown): boolean {
  return (err as { code?: unknown } | null | undefined)?.code === 'ERR_WORKER_OUT_OF_MEMORY';
}

/**
 * `thread` (e.g. `the compute thread`) ran out of memory, with the fixes: less memory per process, or a larger heap.
 * `--max-old-space-size` is a V8 flag of the process: every thread it starts gets that limit (a worker's own execArgv
 * cannot carry it), so it is given to node, or in NODE_OPTIONS.
 */
export function outOfMemoryWords(thread: string): string {
  const limitMib = Math.round(getHeapStatistics().heap_size_limit / 2 ** 20);
  const larger = Math.ceil((limitMib * 2) / 256) * 256;
  return (
    `${thread} ran out of memory (its JavaScript heap reached V8's limit, about ${limitMib} MiB per thread in this ` +
    `process): ` +
    ("a smaller --batch or fewer --devices per process uses less memory; or raise the limit with node's " +
      '--max-old-space-size (MiB), ') +
    `e.g. NODE_OPTIONS=--max-old-space-size=${larger} tandem …`
  );
}
