// A thread that reaches its V8 heap limit is ended by Node (ERR_WORKER_OUT_OF_MEMORY), not the process: the run's
// error says which thread ran out of memory and the fixes (less memory per process, a larger --max-old-space-size),
// with code OUT_OF_MEMORY. Real threads at a real limit: a Worker given resourceLimits, and the CLI under node
// --max-old-space-size=128 (every thread's limit) with a model or data module that fills its thread's heap.
import t from 'tap';
import { spawn } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { tandem } from './fixtures/tandem-lines.js';
import { isWorkerOutOfMemory, outOfMemoryWords } from '../src/actors/worker-memory.js';

const fixture = (name: string) => fileURLToPath(new URL(`../../test/fixtures/${name}`, import.meta.url));
const FIX =
  /ran out of memory \(its JavaScript heap reached V8's limit, about \d+ MiB per thread in this process\): a smaller --batch or fewer --devices per process uses less memory; or raise the limit with node's --max-old-space-size \(MiB\), e\.g\. NODE_OPTIONS=--max-old-space-size=\d+ tandem/;

t.test(
  "a Worker at its heap limit (resourceLimits 8 MiB): Node's error is known as out of memory; a thrown error is not",
  async t => {
    const filler = 'const held = []; for (;;) held.push(new Array(1e5).fill(Math.random()));';
    const full = new Worker(filler, { eval: true, resourceLimits: { maxOldGenerationSizeMb: 8 } });
    const [err] = (await once(full, 'error')) as [Error];
    t.ok(isWorkerOutOfMemory(err), `${(err as NodeJS.ErrnoException).code}: ${err.message}`);
    const thrower = new Worker('throw new RangeError("not memory")', { eval: true });
    const [other] = (await once(thrower, 'error')) as [Error];
    t.notOk(isWorkerOutOfMemory(other), 'an error the thread threw');
    t.match(outOfMemoryWords('the compute thread'), new RegExp(`^the compute thread ${FIX.source}`));
  },
);

/** `tandem train ARGS --json` under node --max-old-space-size=128: its failed event and exit code. */
async function trainAtSmallHeap(
  args: string[],
): Promise<{ code: number | null; failed: { code: string; message: string }; stderr: string }> {
  const run = tandem(
    [
      'train',
      ...args,
      '--dataset-size',
      '64',
      '--batch',
      '8',
      '--steps',
      '3',
      '--devices',
      '2',
      '--backend',
      'cpu',
      '--json',
    ],
    () => {},
    (command, argv) => spawn(command, ['--max-old-space-size=128', ...argv], { stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  const { code } = await run.ended;
  const line = run.lines.find(l => l.startsWith('{"event":"failed"'));
  return {
    code,
    failed: line ? JSON.parse(line) : { code: 'none', message: run.stderr.join('\n') },
    stderr: run.stderr.join('\n'),
  };
}

t.test(
  "a device's compute thread at its heap limit (a model too large, a leak): OUT_OF_MEMORY naming the device and " +
    'thread, with the fixes',
  async t => {
    const { code, failed, stderr } = await trainAtSmallHeap([
      '--model',
      fixture('leaky-model.mjs'),
      '--data',
      'synthetic-images',
      '--image-size',
      '6x6x1',
      '--classes',
      '2',
    ]);
    t.equal(code, 1, 'exit 1');
    t.equal(failed.code, 'OUT_OF_MEMORY', failed.message);
    t.match(
      failed.message,
      new RegExp(`^device [01] failed at step 0 in phase setup \\(compute thread\\): the compute thread ${FIX.source}`),
    );
    t.match(stderr, /tandem: device [01] failed .*the compute thread ran out of memory/, 'the CLI prints it');
  },
);

t.test(
  'a data loader thread at its heap limit: OUT_OF_MEMORY naming the device whose shard it read, with the fixes',
  async t => {
    const { code, failed } = await trainAtSmallHeap(['--model', 'mlp', '--data', fixture('leaky-data.mjs')]);
    t.equal(code, 1, 'exit 1');
    t.equal(failed.code, 'OUT_OF_MEMORY', failed.message);
    t.match(
      failed.message,
      new RegExp(`^device [01] failed at step 1 in phase load \\(data loader\\): its data loader thread ${FIX.source}`),
    );
  },
);

t.test(
  "the profiler's thread at its heap limit (--strategy auto): OUT_OF_MEMORY naming it, with the fixes",
  async t => {
    const { code, failed } = await trainAtSmallHeap([
      '--model',
      fixture('leaky-model.mjs'),
      '--data',
      'synthetic-images',
      '--image-size',
      '6x6x1',
      '--classes',
      '2',
      '--strategy',
      'auto',
    ]);
    t.equal(code, 1, 'exit 1');
    t.equal(failed.code, 'OUT_OF_MEMORY', failed.message);
    t.match(failed.message, new RegExp(`^the thread of the profiler of .*leaky-model\\.mjs ${FIX.source}`));
  },
);
