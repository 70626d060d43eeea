/**
 * What a run does at the door, before any thread starts: every place it will
 * write is created and probed (output-places.ts), and the places it writes
 * results, checkpoints and its trace to are locked for it (run-lock.ts); an
 * --out holding a finished run is refused unless --overwrite or --resume.
 * The run then writes under the real paths locked (`placed`), not through
 * the names given: a symbolic link repointed mid-run does not move its
 * writes into a directory another run holds.
 */
import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { TandemError } from '../errors.js';
import type { ResolvedConfig } from '../config-types.js';
import { lockedDirectories, OUT_FILES, outputPlacesOf, prepareOutputPlaces } from './output-places.js';
import { acquireRunLock, heldElsewhere, LOCK_FILE, type LockPlace, type RunLock } from './run-lock.js';

type Claimed = Pick<ResolvedConfig, 'out' | 'trace' | 'checkpointDir' | 'classifier' | 'overwrite' | 'resume'>;

/** The paths a run writes to, as real paths captured when they were locked. */
export type RealPlaces = Partial<Pick<ResolvedConfig, 'out' | 'trace' | 'checkpointDir'>>;

export interface ClaimedOutputs extends RunLock {
  /** `cfg` with its output paths replaced by the real paths locked. */
  placed<T extends RealPlaces>(cfg: T): T;
}

export async function claimOutputs(cfg: Claimed, notice: (message: string) => void): Promise<ClaimedOutputs> {
  // A finished run's results are not replaced without a word (as Hugging Face's Trainer refuses a non-empty
  // output_dir): --overwrite replaces them, --resume continues the run.
  if (cfg.out !== undefined && !cfg.overwrite && cfg.resume === undefined) {
    const summary = path.join(cfg.out, OUT_FILES.summary);
    if ((await stat(summary).catch(() => undefined))?.isFile())
      throw new TandemError(
        'BAD_OUTPUT',
        `--out ${cfg.out} holds a finished run (${summary}): give --overwrite to replace its results, --resume to ` +
          'continue it, or another directory',
      );
  }
  const places = outputPlacesOf(cfg);
  await prepareOutputPlaces(places);
  const dirs = await Promise.all(lockedDirectories(places).map(async d => ({ ...d, path: await realpath(d.path) })));
  const unique: LockPlace[] = dirs.filter((d, i) => dirs.findIndex(e => e.path === d.path) === i);
  const real: RealPlaces = {
    out: cfg.out === undefined ? undefined : await realpath(cfg.out),
    checkpointDir: cfg.checkpointDir === undefined ? undefined : await realpath(cfg.checkpointDir),
  };
  if (cfg.trace !== undefined) {
    real.trace = path.join(await realpath(path.dirname(path.resolve(cfg.trace))), path.basename(cfg.trace));
    const trace = traceLock(cfg.trace, real.trace, unique);
    if (trace) unique.push(trace);
  }
  const lock = await acquireRunLock(unique, notice);
  const taken = real.out === undefined ? undefined : ownFilesHeldElsewhere(real.out, `--out ${cfg.out}`);
  if (taken) {
    await lock.release();
    throw taken;
  }
  return { ...lock, placed: c => ({ ...c, ...definedOf(real) }) };
}

function definedOf(real: RealPlaces): RealPlaces {
  return Object.fromEntries(Object.entries(real).filter(([, v]) => v !== undefined)) as RealPlaces;
}

/** The lock file of a trace file's own lock: next to it, hidden. */
export function traceLockFile(realTrace: string): string {
  return path.join(path.dirname(realTrace), `.${path.basename(realTrace)}.tandem-run.lock`);
}

/**
 * A `--trace` file outside every directory the run locks gets its own lock (a lock file next to it); one inside a
 * directory another run holds is refused.
 */
function traceLock(given: string, realTrace: string, dirs: readonly LockPlace[]): LockPlace | undefined {
  const dir = path.dirname(realTrace);
  if (dirs.some(d => d.path === dir)) return undefined; // inside this run's own --out or --checkpoint-dir
  const label = `--trace ${given}`;
  const inside = heldElsewhere(path.join(dir, LOCK_FILE), { label, fix: `give a --trace file outside ${dir}` });
  if (inside) throw inside;
  return { path: realTrace, file: traceLockFile(realTrace), label, fix: 'give another --trace file' };
}

/** A file of `--out` (its model, summary, trace, …) that another run holds as its `--trace`: RUN_LOCKED naming it. */
function ownFilesHeldElsewhere(realOut: string, label: string): TandemError | undefined {
  const files = [OUT_FILES.model, OUT_FILES.weights, OUT_FILES.summary, OUT_FILES.timeline, OUT_FILES.trace];
  for (const name of [...files, OUT_FILES.events]) {
    const held = heldElsewhere(traceLockFile(path.join(realOut, name)), {
      label: `${label} (its ${name})`,
      fix: 'give another directory',
    });
    if (held) return held;
  }
  return undefined;
}
