// Options a plugin's parts declare themselves (a method's, a transport's `options`), not through registerOptions:
// their values reach the part on every thread, the hosts compare them, and a checkpoint's fingerprint holds a
// method's. test/fixtures/part-options-plugin.ts is the plugin.
import t from 'tap';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, resolveConfig, type TrainConfig } from '../src/index.js';
import { flagDifferences, hostFlags } from '../src/world/host-flags.js';
import { runFingerprint } from '../src/trainer/run-checkpoints.js';
import { optionsReference } from '../src/cli/reference-docs.js';

const plugin = fileURLToPath(new URL('./fixtures/part-options-plugin.js', import.meta.url));
const base: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  classes: 4,
  datasetSize: 48,
  batch: 12,
  steps: 1,
  backend: 'cpu',
  seed: 5,
  devices: 2,
  plugins: [plugin],
};

t.test("a plugin method's option reaches its part on each compute thread; not given, its default", async t => {
  const plain = await train({ ...base, method: 'scaled-loss' });
  const scaled = await train({ ...base, method: 'scaled-loss', lossScale: 4 } as TrainConfig);
  const ratio = scaled.history[0].loss / plain.history[0].loss;
  t.ok(Math.abs(ratio - 4) < 1e-4, `the loss with lossScale 4 is ${ratio.toFixed(5)} times the default's`);
});

t.test("a plugin transport's option reaches its prepare and each rank's thread", async t => {
  await t.rejects(train({ ...base, transport: 'tagged-memory', memoryTag: 'refuse-on-rank' } as TrainConfig), {
    message: /rank \d's thread read memoryTag refuse-on-rank/,
  });
  const done = await train({ ...base, transport: 'tagged-memory', memoryTag: 'plain' } as TrainConfig);
  t.equal(done.history.length, 1, 'trains with the plain tag');
});

t.test("a plugin engine's option reaches its start on each thread", async t => {
  await t.rejects(train({ ...base, backend: 'cpu-tagged', engineTag: 'refuse-at-start' } as TrainConfig), {
    message: /the engine's start read engineTag refuse-at-start/,
  });
  const done = await train({ ...base, backend: 'cpu-tagged', engineTag: 'plain' } as TrainConfig);
  t.equal(done.history.length, 1, 'trains with the plain tag');
});

t.test("hosts that give a part's option other values are refused, naming it; the fingerprint holds it", async t => {
  const cfg = (c: Record<string, unknown>) =>
    resolveConfig({ ...base, method: 'scaled-loss', transport: 'tagged-memory', ...c } as TrainConfig);
  const two = await cfg({ lossScale: 2, memoryTag: 'plain' });
  const three = await cfg({ lossScale: 3, memoryTag: 'refuse-on-rank' });
  t.same(flagDifferences(hostFlags(two, false), hostFlags(three, false), 'here', 'on host 1'), [
    'lossScale: 2 here, 3 on host 1',
    'memoryTag: "plain" here, "refuse-on-rank" on host 1',
  ]);
  t.not(runFingerprint(two), runFingerprint(three), 'another loss scale: another run');
  t.match(runFingerprint(two), /"lossScale":2/);
  const engine = await resolveConfig({ ...base, backend: 'cpu-tagged', engineTag: 'plain' } as TrainConfig);
  t.match(runFingerprint(engine), /"partOptions":\{"engineTag":"plain"\}/, "the engine's too");
  const none = runFingerprint(await resolveConfig({ ...base }));
  t.notMatch(none, /partOptions/, 'a run without them: the fingerprint is as before (older checkpoints resume)');
});

t.test("a part's option given while another part of its kind runs is refused, naming its part", async t => {
  await t.rejects(resolveConfig({ ...base, lossScale: 2 } as TrainConfig), {
    code: 'BAD_CONFIG',
    message:
      'config.lossScale: applies to method scaled-loss only, not method data-parallel: give --method scaled-loss, ' +
      'or remove --loss-scale',
  });
  await t.rejects(resolveConfig({ ...base, memoryTag: 'plain' } as TrainConfig), {
    message: /config\.memoryTag: applies to transport tagged-memory only, not transport shared-memory/,
  });
  await resolveConfig({ ...base, transport: 'tagged-memory', memoryTag: 'plain' } as TrainConfig);
});

t.test("the parts' options are in the generated reference, with their flag, default and hosts rule", async t => {
  await import(pathToFileURL(plugin).href);
  const reference = optionsReference();
  t.match(reference, /\| `lossScale` \| `--loss-scale` X \| number \| 1 \| same \|/);
  t.match(reference, /\| `memoryTag` \| `--memory-tag` \| string: `plain`, `refuse-on-rank` \| plain \| same \|/);
});

t.test("a checkpoint of a plugin method's run resumes with its options, and refuses others", async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-part-options-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const cfg = { ...base, method: 'scaled-loss', lossScale: 2 } as TrainConfig;
  await train({ ...cfg, steps: 2, checkpointEvery: 1, checkpointDir: dir });
  const atOne = path.join(dir, 'checkpoint-000000001.tandem');
  await t.rejects(train({ ...cfg, lossScale: 3, steps: 2, resume: atOne } as TrainConfig), {
    message: /other settings: partOptions\.lossScale 2 in the checkpoint, 3 in this run/,
  });
  t.equal((await train({ ...cfg, steps: 2, resume: atOne })).firstStep, 2, 'the same options: resumes');
});
