/**
 * A lock the kernel holds for the run lock (run-lock.ts): flock(2) on the open lock file, from the shm addon
 * (native/src/shm-addon.cc; Node has no flock). The kernel drops it when the holder's last descriptor of the file
 * closes — at its death too, `kill -9` included — so a lock is never left behind by a dead run, a zombie or a reused
 * PID. Without the addon (not built, not Linux) the run lock falls back to its owner's PID liveness.
 */
import { fileURLToPath } from 'node:url';
import { loadAddonAt } from '../addon-load.js';

interface FlockAddon {
  /** 0: taken; 1: another open file holds it; < 0: -errno. */
  flock(fd: number): number;
}

// This file runs from dist/src/output/: the addon is built in <package>/native/shm/build/Release/.
const DEFAULT_PATH = fileURLToPath(new URL('../../../native/shm/build/Release/tandem_shm.node', import.meta.url));

let cached: ((fd: number) => number) | null | undefined;

/** flock(fd, LOCK_EX | LOCK_NB) (0 taken, 1 held elsewhere, < 0 -errno), or undefined without the addon. */
export function kernelFlock(): ((fd: number) => number) | undefined {
  if (cached === undefined) {
    const load = loadAddonAt<FlockAddon>('shm', process.env.TANDEM_SHM_ADDON || DEFAULT_PATH, a =>
      typeof a.flock === 'function' ? undefined : 'missing flock',
    );
    cached = load.loaded ? (fd: number) => load.addon.flock(fd) : null;
  }
  return cached ?? undefined;
}
