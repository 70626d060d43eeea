// Communication hooks from the user's side: a hook as a module path or its file: URL, in a directory with a space (one
// that all-reduces gives the all-reduce's bits), one registered through the API, duplicates refused; bad hook names and
// options named before any thread
// starts; the CLI flags.
import t from 'tap';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { train, registerCommHook, type TrainConfig } from '../src/index.js';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';

const base: TrainConfig = {
  model: 'mlp',
  data: 'mnist',
  devices: 2,
  batch: 32,
  steps: 4,
  backend: 'cpu',
  seed: 4,
  lr: 0.05,
};

t.test('a user hook as a module path, and one registered through the API', async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem hook ')); // a space: a file: URL of it holds %20
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'plain-hook.mjs');
  writeFileSync(
    file,
    `export default { name: 'plain', description: 'all-reduce mean', init: () => ({ calls: 0 }),
    exchange: (bucket, state, collective) => {
      state.calls++;
      return collective.allReduce(bucket.buffer, 0, bucket.buffer.length, 'mean');
    } };\n`,
  );
  const cfg = base;
  const plain = await train(cfg);
  const hooked = await train({ ...cfg, commHook: file });
  t.equal(hooked.wire.commHook, 'plain');
  t.same(hooked.weights, plain.weights, "a hook that all-reduces gives the all-reduce's bits");
  const byUrl = await train({ ...cfg, commHook: pathToFileURL(file).href });
  t.same(byUrl.weights, plain.weights, `the same hook as a file: URL (${pathToFileURL(file).href})`);
  registerCommHook({ name: 'api-plain', description: 'x', init: () => undefined, exchange: async () => undefined });
  t.throws(
    () => registerCommHook({ name: 'fp16', description: 'x', init: () => undefined, exchange: async () => undefined }),
    /already registered/,
  );
});

t.test('bad hook names and options are named before any thread starts; the CLI flags', async t => {
  await t.rejects(
    train({ ...base, commHook: 'fp8' }),
    /communication hook 'fp8' is not registered \(registered: fp16, bf16, powersgd/,
  );
  await t.rejects(train({ ...base, commHook: './nowhere.mjs' }), /config.commHook: .\/nowhere.mjs: no such file/);
  await t.rejects(
    train({ ...base, commHook: 'powersgd', commHookOptions: { rank: 0 } }),
    /commHookOptions.rank: must be an integer >= 1/,
  );
  await t.rejects(
    train({ ...base, commHookOptions: { rank: 2 } }),
    /config\.commHookOptions\.rank: given without commHook/,
  );
  const { config } = parseTrainArgs([
    '--comm-hook',
    'powersgd',
    '--powersgd-rank',
    '2',
    '--powersgd-start-step',
    '5',
    '--no-warm-start',
  ]);
  t.same(
    { hook: config.commHook, options: config.commHookOptions },
    { hook: 'powersgd', options: { rank: 2, startStep: 5, warmStart: false } },
  );
});
