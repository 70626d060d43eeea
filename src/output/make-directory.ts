/**
 * Creates a directory and its missing parents one level at a time. Node's
 * `mkdir(…, { recursive: true })` never returns under /proc (mkdir there fails
 * with ENOENT although the parent exists, and Node retries); here every level
 * is tried once, and a failure names the path and the reason.
 */
import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { TandemError } from '../errors.js';
import { fsErrorCode, fsReason } from './fs-reason.js';

/** `dir`, created if missing. `label` names it for the user (e.g. `--out out/run`). */
export async function makeDirectory(dir: string, label: string): Promise<void> {
  const target = path.resolve(dir);
  const missing: string[] = [];
  for (let at = target; ; at = path.dirname(at)) {
    const found = await stat(at).catch((err: unknown) => {
      if (fsErrorCode(err) === 'ENOENT' || fsErrorCode(err) === 'ENOTDIR') return undefined;
      throw new TandemError('BAD_OUTPUT', `${label}: cannot look at ${at}: ${fsReason(err)}`, undefined, {
        cause: err,
      });
    });
    if (found) {
      if (!found.isDirectory())
        throw new TandemError('BAD_OUTPUT', `${label}: ${at} is a file, and a directory is needed there`);
      break;
    }
    missing.unshift(at);
    if (path.dirname(at) === at) break;
  }
  for (const d of missing) await makeOneLevel(d, label);
}

async function makeOneLevel(dir: string, label: string): Promise<void> {
  try {
    await mkdir(dir);
  } catch (err) {
    // made meanwhile
    if (fsErrorCode(err) === 'EEXIST' && (await stat(dir).catch(() => undefined))?.isDirectory()) return;
    const parent = path.dirname(dir);
    const why =
      fsErrorCode(err) === 'ENOENT'
        ? `${parent} does not allow new entries (mkdir gave ENOENT: a virtual file system such as /proc or /sys)`
        : fsReason(err);
    throw new TandemError('BAD_OUTPUT', `${label}: cannot create directory ${dir}: ${why}`, undefined, { cause: err });
  }
}
