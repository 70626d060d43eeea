// `--keep-best K` across a resume: a run stopped after epoch 2 and resumed (`--resume`, the same `--out`) to epoch 4
// keeps the same K folders of best/ and lists the same bestEpochs as the run of 4 epochs uninterrupted — not K more
// beside the ones it kept before.
import t from 'tap';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runTandem } from './fixtures/cli-process.js';
import { smallRunArgs } from './fixtures/small-run.js';

const ARGS = ['train', ...smallRunArgs(), '--devices', '1', '--validation-split', '0.25', '--lr', '1.5'];
const ARGS_CKPT = [...ARGS, '--keep-best', '2', '--checkpoint-every', '3', '--quiet'];

interface Kept {
  epoch: number;
  value: number;
}

async function train(out: string, epochs: number, resume: boolean): Promise<void> {
  const run = await runTandem([
    ...ARGS_CKPT,
    '--epochs',
    String(epochs),
    '--out',
    out,
    ...(resume ? ['--resume', out] : []),
  ]);
  if (run.code !== 0) throw new Error(`tandem exited ${run.code}\n${run.stdout}\n${run.stderr}`);
}

async function kept(out: string): Promise<{ folders: string[]; best: Kept[] }> {
  const summary = JSON.parse(await readFile(path.join(out, 'summary.json'), 'utf8')) as { bestEpochs: Kept[] };
  const folders = (await readdir(path.join(out, 'best'))).filter(f => f.startsWith('epoch-')).sort();
  return { folders, best: summary.bestEpochs.map(({ epoch, value }) => ({ epoch, value })) };
}

t.test('--keep-best 2 resumed keeps the 2 best epochs of the whole run', async t => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tandem-keep-best-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const [whole, resumed] = [path.join(dir, 'whole'), path.join(dir, 'resumed')];
  await train(whole, 4, false);
  await train(resumed, 2, false);
  await train(resumed, 4, true);
  const expected = await kept(whole);
  t.equal(expected.folders.length, 2, 'the uninterrupted run keeps 2');
  t.same(await kept(resumed), expected, 'the resumed run keeps the same epochs, with the same values');
});
