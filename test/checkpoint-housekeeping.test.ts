// The checkpoint directory stays tidy: only the K newest checkpoints are kept, temporaries that a crash left are
// removed when a run starts (never those of a live writer), and two writers in one process never share a temporary.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, type RunEvent } from '../src/index.js';
import { checkpointPath, readCheckpoint, type Checkpoint } from '../src/checkpoint/checkpoint-file.js';
import { CheckpointStore } from '../src/checkpoint/checkpoint-store.js';

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'tandem-keep-'));
/** A process id that no process has now: a child's, after it exited. */
const deadPid = () => Number(execFileSync(process.execPath, ['-p', 'process.pid'], { encoding: 'utf8' }).trim());

t.test(
  "keepCheckpoints: the K newest are kept; a crash's temporaries are removed at start, with a warning",
  async t => {
    const dir = tmp();
    const leftover = `${path.basename(checkpointPath(dir, 2))}.tmp-${deadPid()}-0badc0de-0`;
    const legacy = `${path.basename(checkpointPath(dir, 4))}.tmp-${deadPid()}`;
    for (const n of [leftover, legacy]) writeFileSync(path.join(dir, n), 'partial');
    const events: RunEvent[] = [];
    await train(
      {
        model: 'mlp',
        data: 'synthetic-images',
        imageSize: [6, 6, 1],
        datasetSize: 300,
        batch: 12,
        devices: 2,
        backend: 'cpu',
        steps: 10,
        checkpointEvery: 2,
        keepCheckpoints: 2,
        checkpointDir: dir,
      },
      { onEvent: e => events.push(e) },
    );
    t.same(
      readdirSync(dir).sort(),
      [8, 10].map(s => path.basename(checkpointPath(dir, s))),
      'checkpoints 8 and 10, nothing else',
    );
    t.same(
      events.filter(e => e.type === 'checkpoint').map(e => (e as { step: number }).step),
      [2, 4, 6, 8, 10],
      'every checkpoint was written',
    );
    t.match(
      events.find(e => e.type === 'warning'),
      { step: 0, message: /removed 2 temporary file\(s\) that interrupted checkpoint writes left/ },
    );
    t.equal((await readCheckpoint(checkpointPath(dir, 10))).step, 10);
  },
);

t.test(
  "two writers in one process: the same checkpoint at once, distinct temporaries; a live writer's temporary is not " +
    'stale',
  async t => {
    const dir = tmp();
    const ckpt: Checkpoint = {
      step: 7,
      weights: [{ name: 'w', shape: [4] }],
      params: new Float32Array([1, 2, 3, 4]),
      optimizerState: [],
      fingerprint: 'f',
    };
    const a = new CheckpointStore(dir, 0),
      b = new CheckpointStore(dir, 0);
    const written = await Promise.all([a.write(ckpt), b.write(ckpt), a.write(ckpt)]);
    t.same(new Set(written).size, 1, 'all three writes ended in the one file');
    t.same(Array.from((await readCheckpoint(written[0])).params), [1, 2, 3, 4], 'which reads back whole');
    const live = `${path.basename(checkpointPath(dir, 9))}.tmp-${process.pid}-${b.writer}-5`;
    const gone = `${path.basename(checkpointPath(dir, 9))}.tmp-${process.pid}-feedbeef-0`;
    for (const n of [live, gone]) writeFileSync(path.join(dir, n), 'partial');
    t.same(
      await a.removeStaleTemporaries(),
      [gone],
      "only the temporary of no live writer is removed (this process's pid, a writer that is gone)",
    );
    b.close();
    t.same(await a.removeStaleTemporaries(), [live], 'once its writer closed, it is stale too');
    a.close();
  },
);
