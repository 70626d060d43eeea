// A run locks its --out and --checkpoint-dir: a second run on the same
// directory (another process, or this one) is refused with the owner's PID;
// a lock left by a process that died is taken over with a notice; the lock
// goes when the run ends, failed or not. The lock is the kernel's (flock): a
// resume right after kill -9 of its holder is accepted, though its PID is a
// zombie still. A symbolic link planted at the lock's name is refused, its target untouched.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { train, type RunEvent, type TrainConfig } from '../src/index.js';
import { acquireRunLock, LOCK_FILE } from '../src/output/run-lock.js';
import { kernelFlock } from '../src/output/kernel-lock.js';
import { osThreads } from './fixtures/os-threads.js';
import { withFault } from './fixtures/fault-plugin.js';

const holder = fileURLToPath(new URL('./fixtures/hold-run-lock.js', import.meta.url));
const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'tandem-lock-'));
const tiny: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  datasetSize: 64,
  batch: 8,
  steps: 2,
  devices: 2,
  backend: 'cpu',
};

/**
 * A real second process holding the lock on `dir` (or, with 'exit', leaving it behind); resolves with its PID once it
 * holds it.
 */
function lockInAnotherProcess(
  dir: string,
  mode: 'hold' | 'exit',
): { child: ChildProcess; locked: Promise<number>; exited: Promise<void> } {
  const child = spawn(process.execPath, [holder, dir, mode], { stdio: ['pipe', 'pipe', 'inherit'] });
  const locked = new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      const m = /locked (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', code => reject(new Error(`lock holder exited (${code}) before locking`)));
  });
  locked.catch(() => {});
  const exited = new Promise<void>(resolve => child.on('exit', () => resolve()));
  return { child, locked, exited };
}

t.before(async () => {
  await train({ devices: 0 }).catch(() => {});
}); // lazy module loading, outside the thread counts

t.test(
  'a second run on a directory another process is training into is refused with that PID, before any thread starts',
  async t => {
    const out = tmp();
    const other = lockInAnotherProcess(out, 'hold');
    t.teardown(async () => {
      other.child.stdin!.end();
      await other.exited;
    });
    const pid = await other.locked;
    const owner = JSON.parse(readFileSync(path.join(out, LOCK_FILE), 'utf8')) as { host: string; pid: number };
    t.same([owner.host, owner.pid], [os.hostname(), pid], 'the lock file holds the host and the PID');
    const before = osThreads();
    await t.rejects(train({ ...tiny, out }), {
      code: 'RUN_LOCKED',
      message: new RegExp(`--out .* is in use by another tandem run: PID ${pid} on ${os.hostname()}`),
    });
    await t.rejects(
      train({ ...tiny, checkpointDir: out, checkpointEvery: 1 }),
      { code: 'RUN_LOCKED', message: new RegExp(`--checkpoint-dir .*PID ${pid}`) },
      'the checkpoint directory is locked too',
    );
    t.equal(osThreads(), before, 'no thread started');
    t.equal(JSON.parse(readFileSync(path.join(out, LOCK_FILE), 'utf8')).pid, pid, 'the owner keeps its lock');
  },
);

t.test('two runs of one process on one directory: the second is refused with this PID', async t => {
  const out = tmp();
  const lock = await acquireRunLock([{ path: out, label: `--out ${out}` }], () => {});
  t.teardown(() => lock.release());
  await t.rejects(train({ ...tiny, out }), { code: 'RUN_LOCKED', message: new RegExp(`PID ${process.pid} `) });
});

t.test(
  'a stale lock (its process died) is taken over with a notice; the lock is released at the end, after a failure too',
  async t => {
    const out = tmp();
    const crashed = lockInAnotherProcess(out, 'exit');
    const deadPid = await crashed.locked;
    await crashed.exited;
    t.ok(existsSync(path.join(out, LOCK_FILE)), 'the dead run left its lock');
    const events: RunEvent[] = [];
    await t.rejects(
      train(
        { ...tiny, out, ...withFault({ device: 1, step: 1, phase: 'forward', kind: 'throw' }) },
        { onEvent: e => events.push(e) },
      ),
      { code: 'DEVICE_FAILED' },
    );
    const notice = events.find(e => e.type === 'warning');
    t.match(
      notice,
      { type: 'warning', message: new RegExp(`took over the run lock of PID ${deadPid} .*no longer running`) },
      'a notice names the dead owner',
    );
    t.notOk(existsSync(path.join(out, LOCK_FILE)), 'released after the failed run');
    const summary = await train({ ...tiny, out });
    t.equal(summary.steps, 2, 'the next run takes the directory');
    t.same(
      readdirSync(out).sort(),
      ['events.jsonl', 'model.json', 'summary.json', 'timeline.svg', 'trace.json', 'weights.bin'],
      'released after a run that succeeded; no probe or temporary left',
    );
  },
);

t.test(
  'a resume right after kill -9 is accepted: the kernel released the lock, though the dead PID is still a zombie',
  async t => {
    if (!kernelFlock()) {
      t.comment('skipped: the shm addon (flock) is not built; the run lock falls back to PID liveness');
      return;
    }
    const out = tmp();
    // The holder's parent is a shell that `exec`s into sleep, which never reaps it: once killed, its PID stays a
    // zombie (kill(pid, 0) succeeds, its start time unchanged), which a PID check takes for a live owner.
    // Its stdin is the test's pipe on fd 3 (a background job's would be /dev/null: it would end, releasing the lock).
    const shell = spawn('sh', ['-c', `"${process.execPath}" "${holder}" "${out}" hold <&3 & exec sleep 600`], {
      stdio: ['pipe', 'pipe', 'inherit', 'pipe'],
    });
    t.teardown(() => shell.kill('SIGKILL'));
    const pid = await new Promise<number>(resolve => {
      let text = '';
      shell.stdout!.on('data', (d: Buffer) => {
        text += d;
        const m = /locked (\d+)/.exec(text);
        if (m) resolve(Number(m[1]));
      });
    });
    await t.rejects(
      acquireRunLock([{ path: out, label: `--out ${out}` }], () => {}),
      {
        code: 'RUN_LOCKED',
        message: new RegExp(`PID ${pid} `),
      },
    );
    process.kill(pid, 'SIGKILL');
    // Until the kernel has made it a zombie and its last thread has ended (the threads share its descriptors, and may
    // end after the main thread turned zombie): a condition, polled between event-loop turns.
    const state = () => readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0];
    const threads = () => readdirSync(`/proc/${pid}/task`).length;
    while (state() !== 'Z' || threads() > 1) await new Promise(resolve => setImmediate(resolve));
    const notices: string[] = [];
    const lock = await acquireRunLock([{ path: out, label: `--out ${out}` }], n => notices.push(n));
    t.equal(state(), 'Z', 'the killed owner is a zombie still');
    t.match(notices, [new RegExp(`took over the run lock of PID ${pid} .*the kernel released its lock`)]);
    await lock.release();
    t.notOk(existsSync(path.join(out, LOCK_FILE)), 'released');
  },
);

t.test('an --out holding a finished run is refused unless --overwrite', async t => {
  const out = tmp();
  await train({ ...tiny, out });
  const before = readFileSync(path.join(out, 'weights.bin'));
  await t.rejects(train({ ...tiny, seed: 9, out }), {
    code: 'BAD_OUTPUT',
    message: /--out .* holds a finished run \(.*summary\.json\): give --overwrite .*--resume/,
  });
  t.ok(readFileSync(path.join(out, 'weights.bin')).equals(before), 'its results untouched');
  await train({ ...tiny, seed: 9, out, overwrite: true });
  t.notOk(readFileSync(path.join(out, 'weights.bin')).equals(before), '--overwrite replaced them');
});

t.test('a symbolic link planted at the lock name is refused, never written through', async t => {
  if (!kernelFlock()) {
    t.comment('skipped: the shm addon (flock) is not built; the run lock falls back to PID liveness');
    return;
  }
  const dir = tmp();
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'shared-out');
  mkdirSync(out);
  const victim = path.join(dir, 'victim.txt');
  writeFileSync(victim, 'not yours\n');
  symlinkSync(victim, path.join(out, LOCK_FILE));
  await t.rejects(
    acquireRunLock([{ path: out, label: `--out ${out}` }], () => {}),
    {
      code: 'BAD_OUTPUT',
      message: /cannot open the run lock .*: it is a symbolic link .*: remove it/,
    },
  );
  t.equal(readFileSync(victim, 'utf8'), 'not yours\n', "the link's target is neither truncated nor written");
});
