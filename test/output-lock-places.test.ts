// A run writes under the directories it locked, not through the names it was
// given: an --out symlink repointed mid-run (at the run's first step) does not
// move its results into the new target, another run's directory; a locked
// directory moved away mid-run is refused by name, nothing written in its
// place. A --trace file is locked as well, wherever it is: a second real
// process holding it (or holding the directory it is in, or holding --out's
// own trace as its --trace) makes a run refuse, naming the path and the fix.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { train, type TrainConfig } from '../src/index.js';
import { LOCK_FILE } from '../src/output/run-lock.js';
import { kernelFlock } from '../src/output/kernel-lock.js';
import { traceLockFile } from '../src/output/claim-outputs.js';
import { SMALL_RUN } from './fixtures/small-run.js';
import { checkpointPath } from '../src/checkpoint/checkpoint-file.js';

const holder = fileURLToPath(new URL('./fixtures/hold-outputs.js', import.meta.url));
const tiny: TrainConfig = { ...SMALL_RUN, steps: 3 };

function tmp(t: Test): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-places-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A real second process holding the outputs of `cfg` (claimOutputs); resolves with its PID once it holds them. */
async function holdInAnotherProcess(t: Test, cfg: object): Promise<number> {
  const child = spawn(process.execPath, [holder, JSON.stringify(cfg)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>(resolve => child.on('exit', () => resolve()));
  t.teardown(async () => {
    child.stdin!.end();
    await exited;
  });
  return new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      const m = /locked (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', code => reject(new Error(`holder exited (${code}) before locking`)));
  });
}

/** Points the symbolic link `link` at `target` in one step (a new link renamed over it). */
function repoint(link: string, target: string): void {
  symlinkSync(target, `${link}.new`);
  renameSync(`${link}.new`, link);
}

t.test('an --out symlink repointed at the first step: the results land in the directory locked', async t => {
  const dir = tmp(t);
  const [mine, theirs, link] = ['mine', 'theirs', 'out'].map(n => path.join(dir, n));
  mkdirSync(mine);
  mkdirSync(theirs);
  symlinkSync(mine, link);
  const pid = await holdInAnotherProcess(t, { out: theirs });
  let repointed = false;
  const summary = await train(
    { ...tiny, out: link, checkpointEvery: 1 },
    {
      onStep: () => {
        if (repointed) return;
        repoint(link, theirs);
        repointed = true;
      },
    },
  );
  t.ok(repointed, 'the link was repointed during the run');
  t.same(readdirSync(theirs), [LOCK_FILE], `nothing written into the other run's directory (PID ${pid})`);
  const written = readdirSync(mine);
  for (const f of ['model.json', 'weights.bin', 'summary.json', 'trace.json', 'timeline.svg'])
    t.ok(written.includes(f), `${f} in the directory locked`);
  t.ok(
    written.some(f => f.startsWith('checkpoint')),
    'checkpoints in the directory locked',
  );
  t.equal(summary.config.out, link, 'the summary names --out as given');
  t.equal(summary.modelPath, path.join(mine, 'model.json'), 'and the model where it was written');
});

t.test('resuming through the same --out symlink is continuing the run: no warning of an earlier run', async t => {
  const dir = tmp(t);
  const [mine, link] = ['mine', 'out'].map(n => path.join(dir, n));
  mkdirSync(mine);
  symlinkSync(mine, link);
  await train({ ...tiny, steps: 2, out: link, checkpointEvery: 1 });
  const warnings: string[] = [];
  await train(
    { ...tiny, steps: 3, out: link, resume: link, checkpointEvery: 1 },
    { onEvent: e => void (e.type === 'warning' && warnings.push(e.message)) },
  );
  t.ok(existsSync(checkpointPath(mine, 3)), 'the resumed run checkpointed its step 3 in the directory locked');
  t.same(warnings, [], 'no warning');
});

t.test('the locked --out moved away mid-run: refused naming it, nothing written in its place', async t => {
  const dir = tmp(t);
  const out = path.join(dir, 'out');
  mkdirSync(out);
  let moved = false;
  await t.rejects(
    train(
      { ...tiny, out },
      {
        onStep: () => {
          if (moved) return;
          renameSync(out, `${out}-moved`);
          mkdirSync(out);
          moved = true;
        },
      },
    ),
    {
      code: 'BAD_OUTPUT',
      message: new RegExp(`--out .*: ${out}, the directory this run locked at its start, was replaced`),
    },
  );
  t.same(readdirSync(out), [], 'nothing written into the directory put in its place');
});

t.test('a --trace file another run holds is refused, naming it and the fix; free again once it ends', async t => {
  const dir = tmp(t);
  const trace = path.join(dir, 'run.trace.json');
  const pid = await holdInAnotherProcess(t, { trace });
  t.ok(existsSync(traceLockFile(trace)), 'the holder locked the trace beside it');
  await t.rejects(train({ ...tiny, trace }), {
    code: 'RUN_LOCKED',
    message: new RegExp(
      `--trace ${trace} is in use by another tandem run: PID ${pid} .*Wait for it to end or give another --trace file`,
    ),
  });
  t.notOk(existsSync(trace), 'no trace written');
  const other = path.join(dir, 'other.trace.json');
  await train({ ...tiny, trace: other });
  t.ok(existsSync(other), 'another trace file in the same directory is free');
  t.notOk(existsSync(traceLockFile(other)), 'its lock is gone with its run');
});

t.test('a --trace inside a directory another run holds, and an --out whose trace another run holds', async t => {
  if (!kernelFlock()) {
    t.comment('skipped: the shm addon (flock) is not built; these cross-checks need the kernel lock');
    return;
  }
  const dir = tmp(t);
  const [held, free] = ['held', 'free'].map(n => path.join(dir, n));
  mkdirSync(free);
  const pid = await holdInAnotherProcess(t, { out: held });
  const inside = path.join(held, 'mine.json');
  await t.rejects(train({ ...tiny, trace: inside }), {
    code: 'RUN_LOCKED',
    message: new RegExp(`--trace ${inside} is in use by another tandem run: PID ${pid} .*outside ${held}`),
  });
  const pid2 = await holdInAnotherProcess(t, { trace: path.join(free, 'trace.json') });
  await t.rejects(train({ ...tiny, out: free }), {
    code: 'RUN_LOCKED',
    message: new RegExp(`--out ${free} \\(its trace.json\\) is in use by another tandem run: PID ${pid2} `),
  });
  t.same(readdirSync(free).sort(), ['.trace.json.tandem-run.lock'], 'the refused run wrote nothing');
});
