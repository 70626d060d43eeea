/**
 * What a run does at the door, before any thread starts: every place it will
 * write is created and probed (output-places.ts), and the directories it
 * writes results and checkpoints to are locked for it (run-lock.ts).
 */
import { realpath } from 'node:fs/promises';
import type { ResolvedConfig } from '../config-types.js';
import { lockedDirectories, outputPlacesOf, prepareOutputPlaces } from './output-places.js';
import { acquireRunLock, type RunLock } from './run-lock.js';

export async function claimOutputs(
  cfg: Pick<ResolvedConfig, 'out' | 'trace' | 'checkpointDir' | 'classifier'>,
  notice: (message: string) => void,
): Promise<RunLock> {
  const places = outputPlacesOf(cfg);
  await prepareOutputPlaces(places);
  const dirs = await Promise.all(lockedDirectories(places).map(async d => ({ ...d, path: await realpath(d.path) })));
  const unique = dirs.filter((d, i) => dirs.findIndex(e => e.path === d.path) === i);
  return acquireRunLock(unique, notice);
}
