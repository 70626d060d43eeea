/**
 * A job of several hosts needs its secret (job-secret.ts) before any thread starts: from `--job-secret-file` (put in
 * this process's TANDEM_JOB_SECRET, so that its threads and the addon's store client have it) or TANDEM_JOB_SECRET
 * itself. Without one the run is refused unless `--insecure`, which says loudly what it gives up.
 */
import { readFileSync, statSync } from 'node:fs';
import { TandemError } from '../errors.js';
import type { TrainConfig } from '../config-types.js';
import { MIN_SECRET_BYTES, SECRET_ENV } from './job-secret.js';

/** Sets `env`'s TANDEM_JOB_SECRET from the file when one is named; BAD_CONFIG when there is no usable secret. */
export function readJobSecret(config: Pick<TrainConfig, 'jobSecretFile' | 'insecure'>, env: NodeJS.ProcessEnv): void {
  const file = config.jobSecretFile;
  if (file !== undefined) {
    let text: string;
    try {
      if (statSync(file).size > 4096) throw new Error('over 4096 bytes: not a secret file');
      text = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      throw new TandemError(
        'BAD_CONFIG',
        `config.jobSecretFile: cannot read ${file}: ${(err as Error).message}`,
        undefined,
        { cause: err },
      );
    }
    env[SECRET_ENV] = text;
  }
  const secret = env[SECRET_ENV];
  if (secret === undefined || secret === '') {
    if (config.insecure) {
      process.stderr.write(
        "tandem: WARNING: --insecure: this job has no secret; any process that reaches host 0's rendezvous port " +
          'can read every key (the checkpoint included), change, stop or join the run (docs/guide/security.md)\n',
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
