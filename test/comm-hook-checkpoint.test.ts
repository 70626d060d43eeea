// Communication hook state in checkpoints: with fp16 (error feedback) and PowerSGD on 2 devices, 2 steps, a
// checkpoint, and 2 resumed steps give the bits of 4 uninterrupted steps; the same checkpoint stripped of its hook
// state resumes with fresh state (a warning) and other bits; a checkpoint with hook state refuses another hook, other
// options or none, naming both.
import t, { type Test } from 'tap';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, type TrainConfig, type TrainSummary } from '../src/index.js';
import { readCheckpoint, writeCheckpoint } from '../src/checkpoint/checkpoint-file.js';

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'tandem-hookckpt-'));
const same = (a: TrainSummary['weights'], b: TrainSummary['weights']) =>
  a.every((w, i) => w.values.every((v, j) => Object.is(v, b[i].values[j])));
const base: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  datasetSize: 300,
  batch: 12,
  devices: 2,
  backend: 'cpu',
  seed: 7,
  lr: 0.1,
};

for (const [name, hook] of [
  ['fp16, error feedback', { commHook: 'fp16' }],
  ['powersgd rank 2 from step 2', { commHook: 'powersgd', commHookOptions: { rank: 2, startStep: 2 } }],
] as [string, TrainConfig][]) {
  t.test(`resume is exact with the hook's state: ${name}`, async t => {
    const dir = tmp();
    // The uninterrupted run writes the checkpoints; the resume starts from the one at step 2.
    const full = await train({ ...base, ...hook, steps: 4, checkpointEvery: 2, checkpointDir: dir });
    const atTwo = path.join(dir, 'checkpoint-000000002.tandem');
    const ckpt = await readCheckpoint(atTwo);
    t.equal(ckpt.commHook?.name, hook.commHook);
    t.equal(ckpt.commHook?.ranks.length, 2, "both ranks' state");
    const residual = (r: number) => ckpt.commHook!.ranks[r].flat().at(-1)!;
    t.ok(
      residual(0).some(v => v !== 0) && residual(0).some((v, i) => v !== residual(1)[i]),
      'non-zero residuals, different per rank',
    );
    const resumed = await train({ ...base, ...hook, steps: 4, resume: atTwo });
    t.equal(resumed.firstStep, 3);
    t.ok(same(resumed.weights, full.weights), '2 + 2 steps = 4 uninterrupted steps, bit for bit');

    // The same checkpoint without its hook state: the hook starts afresh (warned), and the bits differ: the state
    // mattered.
    const { commHook: _dropped, ...stripped } = ckpt;
    const strippedDir = tmp();
    await writeCheckpoint(strippedDir, stripped);
    const warnings: string[] = [];
    const afresh = await train(
      { ...base, ...hook, steps: 4, resume: strippedDir },
      {
        onEvent: e => {
          if (e.type === 'warning') warnings.push(e.message);
        },
      },
    );
    t.match(warnings.join('\n'), /holds no communication hook state.*starts with fresh state/);
    t.notOk(same(afresh.weights, full.weights), 'without the hook state the resumed run differs');
    if (hook.commHook === 'powersgd') await refusals(t, atTwo);
  });
}

/** A checkpoint with hook state refuses another hook, other options, no hook, naming both. */
async function refusals(t: Test, dir: string): Promise<void> {
  await t.rejects(train({ ...base, steps: 4, resume: dir, commHook: 'bf16' }), {
    code: 'BAD_CHECKPOINT',
    message: /communication hook 'powersgd' \{.*"rank":2.*this run has communication hook 'bf16'/,
  });
  await t.rejects(
    train({ ...base, steps: 4, resume: dir, commHook: 'powersgd', commHookOptions: { rank: 1, startStep: 2 } }),
    {
      code: 'BAD_CHECKPOINT',
      message: /'powersgd' \{.*"rank":2.*this run has communication hook 'powersgd' \{.*"rank":1/,
    },
  );
  await t.rejects(train({ ...base, steps: 4, resume: dir }), {
    code: 'BAD_CHECKPOINT',
    message: /this run has no communication hook.*--comm-hook powersgd/,
  });
}
