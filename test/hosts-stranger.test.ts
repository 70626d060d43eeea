// A job of two real host processes on loopback, attacked by a stranger while host 0 waits for host 1 (docs/guide/
// security.md; the attempts are test/fixtures/store-stranger.ts, also tried from a third network namespace in
// hosts-stranger-namespaces.test.ts): without the secret it tries to read the resume key and host 0's flags, to add a
// stop wish, to set a counter key, to join as host 1 and to send a malformed and an oversize request; with a wrong
// secret it tries to join. Every attempt is refused and logged on host 0 naming the stranger's address; the job then
// finishes with the same weights, bit for bit, as the same job undisturbed. A job of several hosts without a secret is
// refused before it starts (BAD_CONFIG naming TANDEM_JOB_SECRET and --job-secret-file).
import t from 'tap';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { killAllTandems, tandem } from './fixtures/tandem-lines.js';
import { freePort } from '../src/world/launch.js';
import { addressTowards } from '../src/world/rendezvous.js';
import { strangerAttempts, type StrangerResult } from './fixtures/store-stranger.js';
import { smallRunArgs } from './fixtures/small-run.js';

const TRAIN = [
  'train',
  '--hosts',
  '2',
  '--devices',
  '1',
  ...smallRunArgs({ seed: 3, steps: 4, strategy: 'sequential' }),
  '--transport',
  'gloo',
];

t.teardown(killAllTandems);
const dir = mkdtempSync(path.join(tmpdir(), 'tandem-stranger-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** Both hosts by hand at a fresh rendezvous; `between` runs once host 0 listens, before host 1 starts. */
async function job(out: string, between: (port: number) => Promise<void>) {
  const port = await freePort();
  const world = ['--rendezvous', `127.0.0.1:${port}`];
  const host0 = tandem([...TRAIN, ...world, '--host-rank', '0', '--out', out]);
  await addressTowards({ host: '127.0.0.1', port }, 60_000);
  await between(port);
  const host1 = tandem([...TRAIN, ...world, '--host-rank', '1']);
  const [e0, e1] = await Promise.all([host0.ended, host1.ended]);
  return { e0, e1, host0, host1 };
}

if (glooAddonOrSkip()) {
  t.test('a stranger without the secret, or with a wrong one, cannot read, write, stop or join', async t => {
    const quiet = await job(path.join(dir, 'quiet'), async () => {});
    t.equal(quiet.e0.code, 0, `undisturbed host 0: ${quiet.host0.stderr.join('\n')}`);
    let tried: StrangerResult | undefined;
    const attacked = await job(path.join(dir, 'attacked'), async port => {
      tried = await strangerAttempts('127.0.0.1', port);
    });
    t.match(tried?.wrongSecret, { code: 'BAD_CONFIG', message: /does not hold this job's secret/ }, 'a wrong secret');
    const answers = tried?.answers;
    t.same(answers, [0, 0, 0, 0, 0, 0, 0], 'the store answered the stranger nothing');
    t.equal(attacked.e0.code, 0, `attacked host 0: ${attacked.host0.stderr.join('\n')}`);
    t.equal(attacked.e1.code, 0, `attacked host 1: ${attacked.host1.stderr.join('\n')}`);
    const refused = attacked.host0.stderr.filter(l => /the rendezvous store refused 127\.0\.0\.1:\d+/.test(l));
    t.ok(refused.length >= 7, `host 0 logged each refusal, naming the address:\n${refused.join('\n')}`);
    t.ok(
      readFileSync(path.join(dir, 'attacked', 'weights.bin')).equals(
        readFileSync(path.join(dir, 'quiet', 'weights.bin')),
      ),
      'weights.bin bit-identical to the undisturbed run',
    );
  });
}

t.test('a job of several hosts without a secret is refused before it starts', async t => {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      path.join(path.dirname(new URL(import.meta.url).pathname), '../src/cli/main.js'),
      ...TRAIN,
      '--rendezvous',
      `127.0.0.1:${port}`,
      '--host-rank',
      '0',
    ],
    { env: { ...process.env, TANDEM_JOB_SECRET: '' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const [code] = (await once(child, 'exit')) as [number];
  t.not(code, 0);
  t.match(stderr, /needs a job secret: set TANDEM_JOB_SECRET .*--job-secret-file FILE.*--insecure/s);
});
