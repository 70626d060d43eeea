/**
 * What a run does at the door, before any thread starts: every place it will
 * write is created and probed (output-places.ts), and the directories it
 * writes results and checkpoints to are locked for it (run-lock.ts); an --out
 * holding a finished run is refused unless --overwrite or --resume.
 */
import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { TandemError } from '../errors.js';
import type { ResolvedConfig } from '../config-types.js';
import { lockedDirectories, OUT_FILES, outputPlacesOf, prepareOutputPlaces } from './output-places.js';
import { acquireRunLock, type RunLock } from './run-lock.js';

export async function claimOutputs(
  cfg: Pick<ResolvedConfig, 'out' | 'trace' | 'checkpointDir' | 'classifier' | 'overwrite' | 'resume'>,
  notice: (message: string) => void,
): Promise<RunLock> {
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
  const unique = dirs.filter((d, i) => dirs.findIndex(e => e.path === d.path) === i);
  return acquireRunLock(unique, notice);
}
