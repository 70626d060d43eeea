/**
 * A job of several hosts needs its secret (job-secret.ts) before any thread starts: from `--job-secret-file` (put in
 * this process's TANDEM_JOB_SECRET, so that its threads and the addon's store client have it) or TANDEM_JOB_SECRET
 * itself. Without one the run is refused unless `--insecure`, which says loudly what it gives up.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { TandemError } from '../errors.js';
import type { TrainConfig } from '../config-types.js';
import { MIN_SECRET_BYTES, SECRET_ENV } from './job-secret.js';

/** The longest secret file read (a secret is a line; a file longer is not one). */
const MAX_SECRET_FILE_BYTES = 4096;

/**
 * Sets `env`'s TANDEM_JOB_SECRET from the file when one is named; BAD_CONFIG when there is no usable secret. `warn`
 * says what the job gives up (default: stderr).
 */
export function readJobSecret(
  config: Pick<TrainConfig, 'jobSecretFile' | 'insecure'>,
  env: NodeJS.ProcessEnv,
  warn: (line: string) => void = line => process.stderr.write(`tandem: ${line}\n`),
): void {
  const file = config.jobSecretFile;
  if (file !== undefined) env[SECRET_ENV] = readSecretFile(file, warn);
  const secret = env[SECRET_ENV];
  if (secret === undefined || secret === '') {
    if (config.insecure) {
      warn(
        "WARNING: --insecure: this job has no secret; any process that reaches host 0's rendezvous port " +
          'can read every key (the checkpoint included), change, stop or join the run (docs/guide/security.md)',
      );
      return;
    }
    throw new TandemError(
      'BAD_CONFIG',
      `a job of several hosts needs a job secret: set ${SECRET_ENV} (the same on every host, e.g. ` +
        '`openssl rand -base64 32`) or --job-secret-file FILE; tandem launch makes one for the hosts it starts; ' +
        '--insecure runs without (trusted networks only, docs/guide/security.md)',
    );
  }
  if (Buffer.byteLength(secret) < MIN_SECRET_BYTES)
    throw new TandemError(
      'BAD_CONFIG',
      `the job secret (${file ? `config.jobSecretFile ${file}` : SECRET_ENV}) has ${Buffer.byteLength(secret)} ` +
        `bytes: give at least ${MIN_SECRET_BYTES} (e.g. \`openssl rand -base64 32\`)`,
    );
}

/**
 * The secret in `file` (a trailing newline dropped), read at most MAX_SECRET_FILE_BYTES + 1 bytes (a device such as
 * /dev/zero, or a large file, is refused, never read whole); a warning when users other than its owner may read or
 * write it (they could then join the job: docs/guide/security.md).
 */
function readSecretFile(file: string, warn: (line: string) => void): string {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const st = fstatSync(fd);
    const buf = Buffer.alloc(MAX_SECRET_FILE_BYTES + 1);
    let at = 0;
    for (let n = 1; n > 0 && at < buf.length; at += n) n = readSync(fd, buf, at, buf.length - at, null);
    if (at > MAX_SECRET_FILE_BYTES) throw new Error(`over ${MAX_SECRET_FILE_BYTES} bytes: not a secret file`);
    if (st.isFile() && (st.mode & 0o077) !== 0)
      warn(
        `WARNING: config.jobSecretFile ${file} can be read or written by users other than its owner (mode ` +
          `${(st.mode & 0o777).toString(8).padStart(4, '0')}): any of them can join this job; chmod 600 ${file}`,
      );
    return buf.toString('utf8', 0, at).replace(/\r?\n$/, '');
  } catch (err) {
    throw new TandemError(
      'BAD_CONFIG',
      `config.jobSecretFile: cannot read ${file}: ${(err as Error).message}`,
      undefined,
      { cause: err },
    );
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
