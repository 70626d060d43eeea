// --job-secret-file (docs/guide/security.md): a file other users may read is warned of, naming its mode and the fix
// (chmod 600), and still read; a file of the owner alone is read silently; a device that never ends (/dev/zero) is
// refused after 4 KiB, never read whole; the secret's trailing newline is dropped.
import t from 'tap';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readJobSecret } from '../src/world/secret-file.js';
import { SECRET_ENV } from '../src/world/job-secret.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-secret-file-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const SECRET = 'a-secret-of-more-than-sixteen-bytes';

/** The secret `readJobSecret` puts in a fresh environment from `file`, and the warnings it gave. */
function read(file: string): { secret?: string; warnings: string[] } {
  const env: NodeJS.ProcessEnv = {};
  const warnings: string[] = [];
  readJobSecret({ jobSecretFile: file }, env, line => warnings.push(line));
  return { secret: env[SECRET_ENV], warnings };
}

t.test('a secret file other users may read is warned of; the owner-only one is not', async t => {
  const file = path.join(dir, 'job.secret');
  writeFileSync(file, `${SECRET}\n`);
  chmodSync(file, 0o644);
  const open = read(file);
  t.equal(open.secret, SECRET, 'read, its newline dropped');
  t.equal(open.warnings.length, 1);
  t.match(open.warnings[0], `config.jobSecretFile ${file} can be read or written by users other than its owner`);
  t.match(open.warnings[0], `(mode 0644): any of them can join this job; chmod 600 ${file}`);
  chmodSync(file, 0o600);
  t.same(read(file), { secret: SECRET, warnings: [] }, 'mode 0600: read without a word');
});

t.test('a device that never ends is refused after 4 KiB', async t => {
  t.throws(() => read('/dev/zero'), {
    code: 'BAD_CONFIG',
    message: 'config.jobSecretFile: cannot read /dev/zero: over 4096 bytes: not a secret file',
  });
  const long = path.join(dir, 'long.secret');
  writeFileSync(long, 'x'.repeat(5000), { mode: 0o600 });
  t.throws(() => read(long), { code: 'BAD_CONFIG', message: /over 4096 bytes/ });
  t.throws(() => read(path.join(dir, 'missing')), { code: 'BAD_CONFIG', message: /cannot read .*missing: ENOENT/ });
});
