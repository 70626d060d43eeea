// `--model PATH` as a user gives it: the directory `--out` wrote (or any
// directory holding a model.json) trains from its model.json, by a bare
// relative name too; a directory without one, or a weights file, is refused
// before any thread naming what to give.
import t from 'tap';
import { mkdirSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { resolveConfig, train, type TrainConfig } from '../src/index.js';
import { osThreads } from './fixtures/os-threads.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-model-path-'));
const base: TrainConfig = {
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  classes: 4,
  datasetSize: 64,
  batch: 8,
  steps: 1,
  devices: 2,
  backend: 'cpu',
};

t.test('the directory --out wrote trains from its model.json, as a path or a bare name', async t => {
  const out = path.join(dir, 'run1');
  const first = await train({ ...base, model: 'mlp', out });
  t.equal(first.modelPath, path.join(out, 'model.json'));
  for (const given of [out, `${out}/`]) {
    const again = await train({ ...base, model: given });
    t.equal(again.steps, 1, `--model ${given} trains`);
  }
  const cwd = process.cwd();
  process.chdir(dir);
  try {
    // resolved on this thread (the threads' --import of the test setup is relative to the first directory)
    const bare = await resolveConfig({ ...base, model: 'run1' });
    t.equal(
      bare.model.source,
      pathToFileURL(path.join(out, 'model.json')).href,
      '--model run1 (a bare directory name) is its model.json',
    );
  } finally {
    process.chdir(cwd);
  }
});

t.test('a directory without model.json, or a weights file: BAD_MODEL before any thread, naming the fix', async t => {
  const empty = path.join(dir, 'empty');
  mkdirSync(empty);
  const cases: [string, RegExp][] = [
    [
      empty,
      /--model .*empty: .*empty is a directory with no model\.json in it; give a TensorFlow\.js layers model\.json/,
    ],
    [
      path.join(dir, 'run1', 'weights.bin'),
      /weights\.bin is neither a TensorFlow\.js layers model\.json nor an ES module .*give the model\.json beside it/,
    ],
  ];
  for (const [model, message] of cases) {
    const before = osThreads();
    await t.rejects(train({ ...base, model }), { name: 'TandemError', code: 'BAD_MODEL', message }, model);
    t.equal(osThreads(), before, 'no thread started');
  }
  await t.rejects(train({ ...base, model: 'no-such-model' }), {
    code: 'UNKNOWN_MODEL',
    message: /or a path to an ES module or a TensorFlow\.js layers model\.json/,
  });
});
