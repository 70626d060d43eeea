// A tf.data.generator of 2 GiB of samples (2048 samples of 262,144 float32s, made on the fly) trains through
// fitDataset on 2 devices in one epoch with a peak RSS below 1 GiB: the bound docs/guide/data.md states, measured in
// a child process (process.resourceUsage().maxRSS). And the peak does not grow with the stream's length: 8 times
// the samples of a 256 MiB run cost less than the read-ahead's bound more, (readAhead + 5) batches.
import t from 'tap';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const child = new URL('./fixtures/stream-memory-child.js', import.meta.url).pathname;
const FLOATS = 262_144,
  BATCH = 16,
  READ_AHEAD = 3;
const GiB = 2 ** 30;

async function run(samples: number): Promise<{ streamed: number; steps: number; maxRSS: number }> {
  const args = [child, ...[samples, FLOATS, BATCH, READ_AHEAD].map(String)];
  const { stdout } = await promisify(execFile)(process.execPath, args, { maxBuffer: 1 << 20 });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as { streamed: number; steps: number; maxRSS: number };
}

t.test('2 GiB streamed in one epoch under 1 GiB of peak RSS, not growing with the stream', async t => {
  const short = await run(256);
  const long = await run(2048);
  t.equal(long.streamed, 2 * GiB, '2 GiB of samples streamed');
  t.equal(long.steps, 2048 / BATCH, 'every batch trained, in one epoch');
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;
  t.ok(long.maxRSS < GiB, `peak RSS ${mib(long.maxRSS)} < 1 GiB`);
  const batchBytes = BATCH * FLOATS * 4;
  const growth = long.maxRSS - short.maxRSS;
  t.ok(
    growth < (READ_AHEAD + 5) * batchBytes,
    `8× the stream (${mib(short.streamed)} → ${mib(long.streamed)}) adds ${mib(growth)} of peak RSS, less than ` +
      `(readAhead + 5) batches = ${mib((READ_AHEAD + 5) * batchBytes)}`,
  );
});
