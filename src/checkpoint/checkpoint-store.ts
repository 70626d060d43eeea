/**
 * A run's checkpoint directory: every write has a temporary name of its own
 * (`<checkpoint>.tmp-<pid>-<writer>-<n>`: two runs in one process never
 * collide), leftovers of interrupted writes are removed when the run starts
 * (those of a process that is gone, or of this process but no live writer),
 * and only the `keep` newest checkpoints are kept (0: all).
 */
import { randomBytes } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { checkpointPath, checkpointSteps, TMP_INFIX, writeCheckpoint, type Checkpoint } from './checkpoint-file.js';

/** The writers alive in this process: their temporaries are never stale. */
const liveWriters = new Set<string>();

const TEMPORARY = /\.tandem\.tmp-(\d+)(?:-([0-9a-f]+)-\d+)?$/;

export class CheckpointStore {
  /** This store's id in the names of its temporaries. */
  readonly writer = randomBytes(4).toString('hex');
  private writes = 0;

  constructor(
    readonly dir: string,
    private readonly keep: number,
  ) {
    liveWriters.add(this.writer);
  }

  /** Removes stale temporaries of interrupted writes; returns their names. */
  async removeStaleTemporaries(): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const stale = names.filter(isStaleTemporary);
    await Promise.all(stale.map(n => rm(path.join(this.dir, n), { force: true })));
    return stale;
  }

  /** Writes `checkpoint` atomically, then removes the checkpoints beyond the `keep` newest (up to this one's step). */
  async write(checkpoint: Checkpoint): Promise<string> {
    const file = await writeCheckpoint(this.dir, checkpoint, `${process.pid}-${this.writer}-${this.writes++}`);
    if (this.keep > 0) {
      const older = (await checkpointSteps(this.dir)).filter(s => s <= checkpoint.step).slice(this.keep);
      await Promise.all(older.map(s => rm(checkpointPath(this.dir, s), { force: true })));
    }
    return file;
  }

  /** The run is over: its temporaries (none after a completed write) count as stale from now on. */
  close(): void {
    liveWriters.delete(this.writer);
  }
}

function isStaleTemporary(name: string): boolean {
  if (!name.includes(TMP_INFIX)) return false;
  const m = TEMPORARY.exec(name);
  if (!m) return false;
  const pid = Number(m[1]);
  if (pid === process.pid) return m[2] === undefined || !liveWriters.has(m[2]);
  return !processAlive(pid);
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, another user's
  }
}
