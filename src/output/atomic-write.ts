/**
 * Atomic writes of results: the data goes to a temporary file next to the
 * target (unique to this process and write), optionally flushed, then renamed
 * over it. A reader sees the old file or the new one, never a part; a failed
 * write (disk full, read-only, …) removes its temporary and names the path.
 */
import { randomBytes } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { TandemError } from '../errors.js';
import { fsReason } from './fs-reason.js';
import { checkStillLocked } from './locked-places.js';

let writes = 0;

/**
 * A fresh temporary name next to `file`: `<file>.tmp-<pid>-<n>-<random>` (a name another user of the directory cannot
 * guess and take first; the file is created exclusively, never followed).
 */
export function temporaryNameFor(file: string): string {
  return `${file}.tmp-${process.pid}-${++writes}-${randomBytes(6).toString('hex')}`;
}

export interface AtomicWriteOptions {
  /** fsync before the rename (checkpoints: the bytes are on disk before the name is). */
  sync?: boolean;
  /**
   * The temporary file's name, when the caller names its own (checkpoints: see checkpoint-store.ts); default
   * temporaryNameFor(file).
   */
  temporary?: string;
}

/**
 * Writes `data` to `file` atomically; returns `file`. Fails with WRITE_FAILED naming `file` and the reason; with
 * BAD_OUTPUT when `file` is under a directory this process locked and that directory was moved or replaced
 * (locked-places.ts).
 */
export async function writeFileAtomically(
  file: string,
  data: string | Uint8Array,
  options: AtomicWriteOptions = {},
): Promise<string> {
  const tmp = options.temporary ?? temporaryNameFor(file);
  await checkStillLocked(file);
  try {
    const handle = await open(tmp, 'wx');
    try {
      await handle.writeFile(data);
      if (options.sync) await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, file);
    return file;
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => {});
    throw new TandemError('WRITE_FAILED', `cannot write ${file}: ${fsReason(err)}`, undefined, { cause: err });
  }
}
