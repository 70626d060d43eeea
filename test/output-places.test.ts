// Every place a run writes is created and probed before any thread starts:
// a bad --out, --trace or --checkpoint-dir fails at once naming the path and
// the reason; a disk without room for the model is refused before step 1;
// results are written atomically, and a write that fails (full disk) names
// the path and leaves no temporary behind.
import t from 'tap';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, writeChromeTrace, type TrainConfig } from '../src/index.js';
import { writeFileAtomically } from '../src/output/atomic-write.js';
import { mountTmpfs, unmount } from './fixtures/scratch-mount.js';
import { osThreads } from './fixtures/os-threads.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-places-'));
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
const aFile = path.join(dir, 'a-file');
writeFileSync(aFile, 'not a directory');

type Asserts = Pick<typeof t, 'rejects' | 'equal'>;

/** `config` is refused with BAD_OUTPUT matching `message`, before any thread starts. */
async function refusedAtTheDoor(t: Asserts, config: TrainConfig, message: RegExp, name: string): Promise<void> {
  const before = osThreads();
  await t.rejects(train({ ...tiny, ...config }), { name: 'TandemError', code: 'BAD_OUTPUT', message }, name);
  t.equal(osThreads(), before, `${name}: no thread started`);
}

t.before(async () => {
  await train({ devices: 0 }).catch(() => {});
}); // lazy module loading, outside the thread counts

t.test('a file where a directory is needed, a directory where a file is needed, a device, /proc', async t => {
  await refusedAtTheDoor(
    t,
    { out: aFile },
    /--out .*a-file: .*a-file is a file, and a directory is needed there/,
    '--out is a file',
  );
  await refusedAtTheDoor(
    t,
    { out: path.join(aFile, 'run') },
    /a-file is a file, and a directory is needed there/,
    '--out under a file',
  );
  await refusedAtTheDoor(
    t,
    { checkpointDir: aFile, checkpointEvery: 1 },
    /--checkpoint-dir .*a-file is a file/,
    '--checkpoint-dir is a file',
  );
  await refusedAtTheDoor(
    t,
    { trace: dir },
    /--trace .*: .* is a directory, and a file is needed there \(give a file name, e\.g\. .*trace\.json\)/,
    '--trace is a directory',
  );
  const out = path.join(dir, 'model-json-is-a-dir');
  mkdirSync(path.join(out, 'model.json'), { recursive: true }); // an atomic rename can never replace a directory
  await refusedAtTheDoor(
    t,
    { out },
    /model\.json is a directory, and a file is needed there/,
    'out/model.json is a directory',
  );
  await refusedAtTheDoor(t, { trace: '/dev/null' }, /\/dev\/null is not a regular file/, '--trace is a device');
  await refusedAtTheDoor(
    t,
    { out: '/proc/tandem-x' },
    /cannot create directory \/proc\/tandem-x: \/proc does not allow new entries/,
    '--out under /proc ends (no mkdir loop)',
  );
});

t.test('a read-only file system (a read-only tmpfs: root ignores chmod)', async t => {
  const ro = path.join(dir, 'ro');
  const why = mountTmpfs(ro, 'ro,size=64k');
  if (why) {
    t.comment(`skipped: ${why}`);
    return;
  }
  t.teardown(() => unmount(ro));
  await refusedAtTheDoor(
    t,
    { out: ro },
    /--out .*ro: cannot write in .*ro: read-only file system \(EROFS\)/,
    '--out on a read-only mount',
  );
  await refusedAtTheDoor(
    t,
    { out: path.join(ro, 'run') },
    /cannot create directory .*ro\/run: read-only file system \(EROFS\)/,
    '--out below a read-only mount',
  );
  await refusedAtTheDoor(
    t,
    { trace: path.join(ro, 'trace.json') },
    /--trace .*: cannot write in .*ro: read-only file system/,
    '--trace on a read-only mount',
  );
});

t.test(
  'a full disk (a 32 KiB tmpfs): the failed write names its path and removes its temporary; the old file stays whole',
  async t => {
    const full = path.join(dir, 'full');
    const why = mountTmpfs(full, 'size=32k');
    if (why) {
      t.comment(`skipped: ${why}`);
      return;
    }
    t.teardown(() => unmount(full));
    const trace = path.join(full, 'trace.json');
    writeFileSync(trace, '{"old": true}');
    const big = new Uint8Array(200 * 1024);
    await t.rejects(writeFileAtomically(path.join(full, 'big.bin'), big), {
      code: 'WRITE_FAILED',
      message: /cannot write .*full\/big\.bin: no space left on the device \(ENOSPC\)/,
    });
    const spans = Array.from({ length: 2000 }, (_, i) => ({
      device: 0,
      thread: 'compute' as const,
      kind: 'forward' as const,
      name: `span-${i}`,
      step: i,
      start: i,
      end: i + 1,
    }));
    await t.rejects(writeChromeTrace(trace, spans), {
      code: 'WRITE_FAILED',
      message: /trace\.json: no space left on the device/,
    });
    t.equal(readFileSync(trace, 'utf8'), '{"old": true}', 'trace.json keeps its old contents whole (atomic write)');
    t.same(readdirSync(full), ['trace.json'], 'no temporary left behind');

    // A run whose --out has room for the probe and the lock but not the model: refused once the model is built, before
    // step 1.
    const out = path.join(full, 'run');
    const events: string[] = []; // (a checkpoint holds the parameters and sgd's momentum: twice the model)
    await t.rejects(train({ ...tiny, out, checkpointEvery: 1 }, { onEvent: e => events.push(e.type) }), {
      code: 'BAD_OUTPUT',
      message:
        /--out .*run: no room for the results: the trained model needs 54 KiB, a checkpoint needs 107 KiB, and the file system of .*run has \d+ KiB free/,
    });
    t.same(events, [], 'refused before the run started training');
    t.same(readdirSync(out), [], 'no temporary and no lock left in --out');
  },
);
