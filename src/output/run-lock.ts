/**
 * A run lock on a directory a run writes (`--out`, `--checkpoint-dir`): the
 * file `.tandem-run.lock`, holding the owner's host, PID and process start
 * time. The lock itself is the kernel's: flock(2) on the open file
 * (kernel-lock.ts), which dies with its holder, `kill -9` included, so a run
 * resumed right after one is accepted. A second run on the directory is
 * refused with the owner's PID; what a dead run left in the file is taken
 * over, with a notice. Without the addon the lock is the file's existence,
 * created with its contents in one step (a hard link of a finished temporary
 * file), and a lock of this host whose process no longer runs is taken over.
 */
import { link, readFile, rename, rm } from 'node:fs/promises';
import { kernelFlock } from './kernel-lock.js';
import {
  closeSync,
  constants,
  fstatSync,
  ftruncateSync,
  openSync,
  readFileSync,
  readSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TandemError } from '../errors.js';
import { fsErrorCode, fsReason } from './fs-reason.js';
import { temporaryNameFor, writeFileAtomically } from './atomic-write.js';
import { forgetLocked, rememberLocked } from './locked-places.js';

export const LOCK_FILE = '.tandem-run.lock';

/** What a lock file holds. */
export interface LockOwner {
  host: string;
  pid: number;
  startTicks?: number;
  started: string;
  token: string;
}

/** The locks a run holds; `release` removes those that are still its own. */
export interface RunLock {
  readonly files: readonly string[];
  release(): Promise<void>;
}

/**
 * A place a run locks: a directory (its lock file `.tandem-run.lock` in it; `path` must be a real path) or, with
 * `file`, the lock file given (a file output outside every locked directory: `--trace`). `label` names it in
 * messages; `fix` ends a refusal (default: give another directory).
 */
export interface LockPlace {
  path: string;
  label: string;
  file?: string;
  fix?: string;
}

/** Locks every place or none; `notice` hears about stale locks taken over. */
export async function acquireRunLock(
  places: readonly LockPlace[],
  notice: (message: string) => void,
): Promise<RunLock> {
  const owner = thisProcess();
  const held: string[] = [];
  const descriptors: number[] = [];
  const directories: string[] = [];
  const release = async () => {
    for (const d of directories) forgetLocked(d);
    for (const f of held) HELD_AT_EXIT.delete(f);
    await Promise.all(held.map(f => releaseLock(f, owner.token)));
    for (const fd of descriptors) closeSync(fd);
    held.length = 0;
    descriptors.length = 0;
    directories.length = 0;
  };
  const flock = kernelFlock();
  try {
    for (const place of places) {
      const file = place.file ?? path.join(place.path, LOCK_FILE);
      if (flock) descriptors.push(flockOne(file, place, owner, notice, flock));
      else await lockOne(file, place, owner, notice);
      held.push(file);
      releaseAtExit(file, owner.token);
      if (place.file === undefined) {
        rememberLocked(place.path, place.label, statSync(place.path));
        directories.push(place.path);
      }
    }
  } catch (err) {
    await release();
    throw err;
  }
  return { files: [...held], release };
}

/**
 * Locks this process holds, removed (when still its own) if the process exits before the run releases them:
 * `process.exit` on a third stop signal, or from the embedding program. A process killed outright leaves its lock,
 * for the next run to take over.
 */
const HELD_AT_EXIT = new Map<string, string>();
let exitHookInstalled = false;

function releaseAtExit(file: string, token: string): void {
  HELD_AT_EXIT.set(file, token);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const [f, t] of HELD_AT_EXIT) {
      try {
        if (parseOwner(readFileSync(f, 'utf8'))?.token === t) unlinkSync(f);
      } catch {
        // gone already, or unreadable: nothing of ours to remove
      }
    }
  });
}

function thisProcess(): LockOwner {
  return {
    host: os.hostname(),
    pid: process.pid,
    startTicks: startTicksOf(process.pid),
    started: new Date().toISOString(),
    token: `${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`,
  };
}

function lockedBy(file: string, place: Pick<LockPlace, 'label' | 'fix'>, other: LockOwner): TandemError {
  return new TandemError(
    'RUN_LOCKED',
    `${place.label} is in use by another tandem run: PID ${other.pid} on ${other.host}, started ${other.started} ` +
      `(lock ${file}). Wait for it to end or ${place.fix ?? 'give another directory'}`,
  );
}

/**
 * The kernel's lock on `file` (created if need be), with `owner` written in it; returns the descriptor that holds it
 * (a plain descriptor: a FileHandle would be closed, and the lock dropped, when collected). Held by another open file:
 * RUN_LOCKED naming the owner it wrote. The file a holder removes at release may be replaced by the time the lock is
 * taken: the lock counts only when the name still leads to the file locked.
 */
function flockOne(
  file: string,
  place: LockPlace,
  owner: LockOwner,
  notice: (message: string) => void,
  flock: (fd: number) => number,
): number {
  const label = place.label;
  for (let attempt = 0; attempt < 5; attempt++) {
    const fd = openLockFile(file, label);
    const taken = flock(fd);
    const before = parseOwner(readSafely(fd));
    if (taken === 0 && statSync(file, { throwIfNoEntry: false })?.ino === fstatSync(fd).ino) {
      if (before && before.token !== owner.token)
        notice(
          `${label}: took over the run lock of PID ${before.pid} on ${before.host} (started ${before.started}), ` +
            'which is no longer running (the kernel released its lock)',
        );
      ftruncateSync(fd, 0);
      writeSync(fd, JSON.stringify(owner));
      return fd;
    }
    closeSync(fd);
    if (taken === 1) {
      if (before) throw lockedBy(file, place, before);
      throw new TandemError('RUN_LOCKED', `${label} is in use by another run holding ${file}`);
    }
    if (taken < 0)
      throw new TandemError('BAD_OUTPUT', `${label}: cannot lock ${file}: flock failed with errno ${-taken}`);
  }
  throw new TandemError('RUN_LOCKED', `${label}: could not take the run lock ${file}: other runs keep taking it`);
}

/** Flags that never follow a symbolic link at the lock's name, nor block on a FIFO planted there. */
const NO_LINK = constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * The lock file `file` opened to read and append (created if missing). Its name is predictable, so in a shared
 * directory a symbolic link planted there would have the run truncate and write the link's target: a link, or
 * anything but a regular file, is refused (BAD_OUTPUT naming it).
 */
function openLockFile(file: string, label: string): number {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDWR | constants.O_CREAT | constants.O_APPEND | NO_LINK, 0o666);
  } catch (err) {
    const link = (err as NodeJS.ErrnoException).code === 'ELOOP';
    throw new TandemError(
      'BAD_OUTPUT',
      `${label}: cannot open the run lock ${file}: ` +
        (link ? 'it is a symbolic link (a run lock is never written through one): remove it' : fsReason(err)),
      undefined,
      { cause: err },
    );
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    throw new TandemError('BAD_OUTPUT', `${label}: the run lock ${file} is not a regular file: remove it`);
  }
  return fd;
}

/** The lock file's text: its first 4 KiB (an owner record is a line), '' when unreadable. */
function readSafely(fd: number): string {
  try {
    const buf = Buffer.alloc(4096);
    return buf.toString('utf8', 0, readSync(fd, buf, 0, buf.length, 0));
  } catch {
    return '';
  }
}

async function lockOne(
  file: string,
  place: LockPlace,
  owner: LockOwner,
  notice: (message: string) => void,
): Promise<void> {
  const label = place.label;
  const text = JSON.stringify(owner);
  for (let attempt = 0; attempt < 3; attempt++) {
    if (await createWith(file, text, label)) return;
    const held = await readFile(file, 'utf8').catch(() => undefined);
    if (held === undefined) continue; // released meanwhile: try again
    const other = parseOwner(held);
    if (!other) {
      throw new TandemError(
        'RUN_LOCKED',
        `${label}: the run lock ${file} is not a tandem lock file (${JSON.stringify(held.slice(0, 60))}); ` +
          'remove it if no tandem run uses this directory',
      );
    }
    if (!isStale(other)) {
      throw new TandemError(
        'RUN_LOCKED',
        `${label} is in use by another tandem run: PID ${other.pid} on ${other.host}, started ${other.started} ` +
          `(lock ${file}). Wait for it to end or ${place.fix ?? 'give another directory'}` +
          (other.host === os.hostname() ? '' : '; tandem cannot tell from this host whether it still runs'),
      );
    }
    if (await takeOver(file, held)) {
      notice(
        `${label}: took over the run lock of PID ${other.pid} on ${other.host} (started ${other.started}), which is ` +
          `no longer running`,
      );
    }
  }
  throw new TandemError('RUN_LOCKED', `${label}: could not take the run lock ${file}: other runs keep taking it`);
}

/** Creates `file` holding `text` in one step; false when it exists. */
async function createWith(file: string, text: string, label: string): Promise<boolean> {
  const tmp = await writeFileAtomically(temporaryNameFor(file), text);
  try {
    await link(tmp, file);
    return true;
  } catch (err) {
    if (fsErrorCode(err) === 'EEXIST') return false;
    throw new TandemError('BAD_OUTPUT', `${label}: cannot create the run lock ${file}: ${fsReason(err)}`, undefined, {
      cause: err,
    });
  } finally {
    await rm(tmp, { force: true });
  }
}

function parseOwner(text: string): LockOwner | undefined {
  try {
    const o = JSON.parse(text) as Partial<LockOwner> | null;
    return o && typeof o.host === 'string' && Number.isInteger(o.pid) && typeof o.token === 'string'
      ? (o as LockOwner)
      : undefined;
  } catch {
    return undefined;
  }
}

/** A lock of this host whose process is gone (or whose PID now belongs to a process started later). */
function isStale(owner: LockOwner): boolean {
  if (owner.host !== os.hostname()) return false;
  try {
    process.kill(owner.pid, 0);
  } catch (err) {
    return fsErrorCode(err) === 'ESRCH';
  }
  const now = startTicksOf(owner.pid);
  return owner.startTicks !== undefined && now !== undefined && now !== owner.startTicks;
}

/** Start time of a process in clock ticks since boot (Linux /proc), to tell a reused PID from its first owner. */
function startTicksOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  } catch {
    return undefined;
  }
}

/**
 * Moves the stale lock aside; if what was moved is not the stale lock read (another run took over meanwhile), puts it
 * back.
 */
async function takeOver(file: string, staleText: string): Promise<boolean> {
  const aside = temporaryNameFor(file);
  try {
    await rename(file, aside);
  } catch {
    return false;
  }
  const moved = await readFile(aside, 'utf8').catch(() => '');
  if (moved !== staleText) await link(aside, file).catch(() => {});
  await rm(aside, { force: true });
  return moved === staleText;
}

async function releaseLock(file: string, token: string): Promise<void> {
  const held = parseOwner(await readFile(file, 'utf8').catch(() => ''));
  if (held?.token === token) await rm(file, { force: true });
}

/**
 * RUN_LOCKED naming the owner when another open file (another run) holds the kernel's lock on the lock file `file`;
 * undefined when it is free, missing, or without the addon. A free lock is taken for an instant and given back: the
 * probe creates nothing.
 */
export function heldElsewhere(file: string, place: Pick<LockPlace, 'label' | 'fix'>): TandemError | undefined {
  const flock = kernelFlock();
  if (!flock) return undefined;
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | NO_LINK);
  } catch {
    return undefined;
  }
  try {
    if (!fstatSync(fd).isFile() || flock(fd) !== 1) return undefined;
    const owner = parseOwner(readSafely(fd));
    return owner
      ? lockedBy(file, place, owner)
      : new TandemError('RUN_LOCKED', `${place.label} is in use by another run holding ${file}`);
  } finally {
    closeSync(fd);
  }
}
