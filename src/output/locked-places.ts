/**
 * The directories this process holds a run lock on, by real path, with the device and inode they had when locked:
 * results are written under that real path (claim-outputs.ts hands the run the real paths, so a symbolic link
 * repointed mid-run does not move its writes), and before each write (atomic-write.ts) the path is checked to still
 * lead to the directory locked. One that was moved or replaced is refused, naming it, rather than written into a
 * directory the run does not hold.
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { TandemError } from '../errors.js';

interface Locked {
  label: string;
  dev: number;
  ino: number;
}

const LOCKED = new Map<string, Locked>();

/** Records `realDir` (a real path, no symbolic link in it) as locked by this process, as it is now. */
export function rememberLocked(realDir: string, label: string, id: { dev: number; ino: number }): void {
  LOCKED.set(realDir, { label, dev: id.dev, ino: id.ino });
}

export function forgetLocked(realDir: string): void {
  LOCKED.delete(realDir);
}

/** The locked directory `file` is in (itself or a parent), or undefined. */
function lockedAbove(file: string): { dir: string; locked: Locked } | undefined {
  if (LOCKED.size === 0) return undefined;
  for (let at = path.dirname(path.resolve(file)); ; at = path.dirname(at)) {
    const locked = LOCKED.get(at);
    if (locked) return { dir: at, locked };
    if (path.dirname(at) === at) return undefined;
  }
}

/**
 * Before a write to `file`: when it is under a directory this process locked, that directory's path must still lead
 * to the directory locked (same device and inode); otherwise BAD_OUTPUT naming it.
 */
export async function checkStillLocked(file: string): Promise<void> {
  const found = lockedAbove(file);
  if (!found) return;
  const now = await stat(found.dir).catch(() => undefined);
  if (now && now.dev === found.locked.dev && now.ino === found.locked.ino) return;
  throw new TandemError(
    'BAD_OUTPUT',
    `${found.locked.label}: ${found.dir}, the directory this run locked at its start, was ` +
      `${now ? 'replaced by another directory' : 'moved or removed'} during the run; ${file} was not written. ` +
      'Leave the output directory in place while a run writes to it',
  );
}
