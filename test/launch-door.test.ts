// `tandem launch` checks what would fail every process it starts before it starts one: an --out or --checkpoint-dir
// with a file in the way or on a read-only file system, and an --out whose run lock another run holds (a real second
// process, test/fixtures/hold-run-lock.ts). Each fails as `tandem train` fails (same exit code, same one line), and no
// host starts (they used to start, host 0 failed, and the launcher stopped the others). With a free --out the check
// gives its lock back: the launch trains and writes there.
import tap from 'tap';
const t = tap;
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LOCK_FILE } from '../src/output/run-lock.js';
import { mountTmpfs, unmount } from './fixtures/scratch-mount.js';
import { runTandem } from './fixtures/cli-process.js';

const holder = fileURLToPath(new URL('./fixtures/hold-run-lock.js', import.meta.url));
const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-launch-door-'));
const SMALL = [
  '--model',
  'mlp',
  '--data',
  'synthetic-images',
  '--image-size',
  '6x6x1',
  '--classes',
  '4',
  '--dataset-size',
  '64',
  '--backend',
  'cpu',
  '--quiet',
  '--batch',
  '8',
  '--steps',
  '2',
];

const runCli = (args: string[]) => runTandem(args);

/** `flags` fail `tandem launch --hosts 2` as they fail `tandem train`, with `message`, and start no host. */
async function failsAsTrain(
  t: Pick<typeof tap, 'equal' | 'match' | 'same' | 'notMatch'>,
  flags: string[],
  message: RegExp,
  name: string,
): Promise<void> {
  const train = await runCli(['train', ...SMALL, ...flags]);
  const launch = await runCli(['launch', '--hosts', '2', ...SMALL, ...flags]);
  t.equal(train.code, 1, `${name}: train exits 1`);
  t.match(train.stderr, message, `${name}: train's message`);
  t.same(
    { code: launch.code, stderr: launch.stderr },
    { code: train.code, stderr: train.stderr },
    `${name}: launch gives train's exit code and message`,
  );
  t.notMatch(launch.stdout + launch.stderr, /\[host \d\]|tandem launch: 2 hosts/, `${name}: no host started`);
}

t.test('--out or --checkpoint-dir with a file in the way: refused before any host starts', async t => {
  const file = path.join(dir, 'a-file');
  writeFileSync(file, 'not a directory\n');
  await failsAsTrain(
    t,
    ['--out', file],
    /^tandem: --out .*a-file: .*a-file is a file, and a directory is needed there\n$/,
    '--out FILE',
  );
  await failsAsTrain(
    t,
    ['--checkpoint-every', '1', '--checkpoint-dir', path.join(file, 'ck')],
    /^tandem: --checkpoint-dir .*: .*a-file is a file, and a directory is needed there\n$/,
    '--checkpoint-dir under a file',
  );
});

t.test('--out on a read-only file system: refused before any host starts', async t => {
  const ro = path.join(dir, 'ro');
  const why = mountTmpfs(ro, 'ro');
  if (why) {
    t.comment(`skipped: ${why}`);
    return;
  }
  t.teardown(() => unmount(ro));
  await failsAsTrain(
    t,
    ['--out', path.join(ro, 'run')],
    /^tandem: --out .*ro\/run: .*read-only/i,
    '--out on a read-only mount',
  );
});

t.test(
  '--out locked by another run: RUN_LOCKED before any host starts; free, the launch trains and writes there',
  async t => {
    const out = path.join(dir, 'locked');
    mkdirSync(out);
    const other = spawn(process.execPath, [holder, out, 'hold'], { stdio: ['pipe', 'pipe', 'inherit'] });
    const exited = new Promise<void>(resolve => other.on('exit', () => resolve()));
    t.teardown(() => {
      if (other.exitCode === null && other.signalCode === null) other.kill('SIGKILL');
    });
    const pid = await new Promise<number>((resolve, reject) => {
      let text = '';
      other.stdout.on('data', (d: Buffer) => {
        text += d;
        const m = /locked (\d+)/.exec(text);
        if (m) resolve(Number(m[1]));
      });
      other.on('exit', code => reject(new Error(`lock holder exited (${code}) before locking`)));
    });
    await failsAsTrain(
      t,
      ['--out', out],
      new RegExp(`^tandem: --out .*locked is in use by another tandem run: PID ${pid} on `),
      '--out locked',
    );
    other.stdin.end(); // the other run ends, giving its lock back
    await exited;
    t.notOk(existsSync(path.join(out, LOCK_FILE)), 'the holder gave its lock back');
    const launch = await runCli(['launch', '--hosts', '2', ...SMALL, '--out', out]);
    if (!t.equal(launch.code, 0, 'free: the launch trains, exit 0')) t.comment(launch.stderr);
    t.ok(
      existsSync(path.join(out, 'model.json')),
      "host 0 wrote its model into --out (the launcher's check gave the lock back)",
    );
    t.notOk(existsSync(path.join(out, LOCK_FILE)), 'no lock left behind');
  },
);
