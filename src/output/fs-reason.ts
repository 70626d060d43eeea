/** A file-system error in words a user can act on, with its code: "no space left on the device (ENOSPC)". */
const REASONS: Record<string, string> = {
  ENOSPC: 'no space left on the device',
  EDQUOT: 'disk quota exceeded',
  EROFS: 'read-only file system',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EISDIR: 'it is a directory, not a file',
  ENOTDIR: 'a part of the path is a file, not a directory',
  ENOENT: 'no such file or directory',
  EEXIST: 'it already exists',
  EMFILE: 'too many open files',
  ENAMETOOLONG: 'the name is too long',
  EIO: 'input/output error',
};

export function fsErrorCode(err: unknown): string | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

export function fsReason(err: unknown): string {
  const code = fsErrorCode(err);
  if (code && REASONS[code]) return `${REASONS[code]} (${code})`;
  return err instanceof Error ? err.message : String(err);
}
