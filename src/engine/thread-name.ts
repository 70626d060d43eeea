/**
 * tandem's threads by name: each names the OS thread it runs on (`tdm-compute3`, `tdm-comm3`, `tdm-loader`,
 * `tdm-validate`), which is what `top -H`, `perf`, gdb and `/proc/<pid>/task/<tid>/comm` show. A step's CPU can then
 * be split by thread (bench/precision.ts does; see docs/guide/precision.md). The rest of a process's threads keep
 * Node's name (`node`): the main thread (its id is the process's), V8's (garbage collection, compilation) and libuv's.
 * Through the native addon where it is built; without it the names stay Node's, and nothing else changes.
 *
 * @example
 * nameThisThread('compute', 3); // /proc/self/task/<tid>/comm reads "tdm-compute3"
 */
import { isMainThread } from 'node:worker_threads';
import { loadNativeAddon } from './native/native-addon.js';

export type ThreadRole = 'compute' | 'comm' | 'loader' | 'validate';

/** What every tandem thread's name starts with. */
export const THREAD_NAME_PREFIX = 'tdm-';

/** The OS name of a thread of `role` (of device `rank`, for a device's threads); at most 15 bytes, Linux's limit. */
export function threadName(role: ThreadRole, rank?: number): string {
  return `${THREAD_NAME_PREFIX}${role}${rank ?? ''}`.slice(0, 15);
}

/**
 * Names the calling worker thread; false on the main thread (the user's, never renamed) and where the addon (or its
 * `nameThread`, in an older build) is missing.
 */
export function nameThisThread(role: ThreadRole, rank?: number): boolean {
  if (isMainThread) return false;
  const load = loadNativeAddon();
  if (!load.loaded || typeof load.addon.nameThread !== 'function') return false;
  return load.addon.nameThread(threadName(role, rank));
}
