/**
 * The optional shm addon (native/shm, built by node-gyp at install on Linux:
 * no library beyond libc). Loaded once per thread; when it is missing,
 * `loadShmAddon` says why instead of throwing.
 *
 * It maps a POSIX shared-memory segment as a SharedArrayBuffer (V8's external
 * backing store over the mapping: posting it to a worker shares the pages),
 * and waits on / wakes a 32-bit word of such a buffer across processes (a
 * futex without FUTEX_PRIVATE_FLAG; `Atomics.wait`/`notify` reach only the
 * threads of one process).
 */
import { fileURLToPath } from 'node:url';
import { loadAddonAt, REBUILD_COMMAND, type AddonLoad } from '../../addon-load.js';

/** What `wait` returns. */
export const WAIT_WOKEN = 0;
export const WAIT_TIMED_OUT = 1;
export const WAIT_NOT_EQUAL = 2;

export interface ShmAddon {
  /** A new zero-filled segment of `bytes` (a name in use is an error), mapped. */
  create(name: string, bytes: number): SharedArrayBuffer;
  /** The segment mapped, or null while it does not exist or is still smaller than `bytes`. */
  open(name: string, bytes: number): SharedArrayBuffer | null;
  /** Removes the name (mappings stay valid); false when it was not there. */
  unlink(name: string): boolean;
  /**
   * Sleeps while the Int32 at `byteOffset` equals `expected`, at most `timeoutMs`: WAIT_WOKEN, WAIT_TIMED_OUT or
   * WAIT_NOT_EQUAL.
   */
  wait(buffer: SharedArrayBuffer, byteOffset: number, expected: number, timeoutMs: number): number;
  /** Wakes every waiter on the Int32 at `byteOffset`, in any process. */
  wake(buffer: SharedArrayBuffer, byteOffset: number): number;
  /** Whether process `pid` runs (a zombie does not). */
  alive(pid: number): boolean;
  version: string;
}

export type ShmAddonLoad = AddonLoad<ShmAddon>;

/** How to get the shm transport, for messages. */
export const SHM_HOW_TO =
  `run ${REBUILD_COMMAND} on Linux (it builds native/shm; nothing to install beyond a ` + `compiler)`;

// This file runs from dist/src/collectives/shm/: the addon is built in <package>/native/shm/build/Release/.
const DEFAULT_PATH = fileURLToPath(new URL('../../../../native/shm/build/Release/tandem_shm.node', import.meta.url));

let cached: ShmAddonLoad | undefined;

/** Loads the addon (once per thread). `TANDEM_SHM_ADDON` overrides its path. */
export function loadShmAddon(): ShmAddonLoad {
  if (cached) return cached;
  const path = process.env.TANDEM_SHM_ADDON || DEFAULT_PATH;
  cached = loadAddonAt<ShmAddon>('shm', path, addon =>
    typeof addon.create === 'function' && typeof addon.wait === 'function' ? undefined : '',
  );
  return cached;
}
