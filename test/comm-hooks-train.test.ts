// Communication hooks in real runs (device threads, the comm pipeline): without a hook the bits are today's and the
// summary's wire count is the parameters; with fp16, bf16 and powersgd every replica stays bit-identical on 3 devices,
// fewer floats cross, and a short MNIST run reaches the accuracy of the uncompressed one; a user hook as a module
// path runs (and gives the all-reduce's bits when it all-reduces); bad hook names and options are named.
import t from 'tap';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, registerCommHook, type TrainConfig, type TrainSummary } from '../src/index.js';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';

const base: TrainConfig = { model: 'mlp', data: 'mnist', devices: 3, batch: 48, steps: 15, backend: 'cpu', seed: 4, lr: 0.05, heldOut: 500, evalSamples: 500 };

async function run(cfg: TrainConfig): Promise<{ summary: TrainSummary; identical: boolean }> {
  let identical = true;
  const summary = await train(cfg, { onStepApplied: (_s, replicas) => { for (const r of replicas) if (!r.every((v, i) => Object.is(v, replicas[0][i]))) identical = false; } });
  return { summary, identical };
}

t.test('each hook: replicas identical on 3 devices, fewer floats sent, held-out accuracy near the uncompressed run\'s', async t => {
  const plain = await run(base);
  t.ok(plain.identical, 'no hook: replicas identical');
  t.equal(plain.summary.wire.floatsPerStep, plain.summary.parameters, 'no hook: every parameter\'s gradient handed to the all-reduce');
  const plainAcc = plain.summary.heldOut!.accuracy;
  for (const [commHook, options, floats] of [['fp16', undefined, Math.ceil(plain.summary.parameters / 2)], ['bf16', undefined, Math.ceil(plain.summary.parameters / 2)],
    ['powersgd', { rank: 4, startStep: 3 }, undefined]] as const) {
    const { summary, identical } = await run({ ...base, commHook, commHookOptions: options });
    t.ok(identical, `${commHook}: every replica the same bits after every step`);
    t.equal(summary.wire.commHook, commHook);
    if (floats !== undefined) t.equal(summary.wire.floatsPerStep, floats, `${commHook}: ${floats} floats per step (of ${summary.parameters})`);
    else t.ok(summary.wire.floatsPerStep < summary.parameters / 4, `${commHook}: ${summary.wire.floatsPerStep.toFixed(0)} floats per step (of ${summary.parameters})`);
    const acc = summary.heldOut!.accuracy;
    t.ok(Math.abs(acc - plainAcc) <= (commHook === 'powersgd' ? 0.05 : 0.02),
      `${commHook}: held-out accuracy ${(100 * acc).toFixed(1)}% vs ${(100 * plainAcc).toFixed(1)}% uncompressed (15 steps; the comm-hooks bench runs the 0.5-point check)`);
  }
});

t.test('a user hook as a module path, and one registered through the API', async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-hook-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'plain-hook.mjs');
  writeFileSync(file, `export default { name: 'plain', description: 'all-reduce mean', init: () => ({ calls: 0 }),
    exchange: (bucket, state, collective) => { state.calls++; return collective.allReduce(bucket.buffer, 0, bucket.buffer.length, 'mean'); } };\n`);
  const cfg: TrainConfig = { ...base, devices: 2, steps: 4, heldOut: undefined, evalSamples: undefined };
  const plain = await train(cfg);
  const hooked = await train({ ...cfg, commHook: file });
  t.equal(hooked.wire.commHook, 'plain');
  t.same(hooked.weights, plain.weights, 'a hook that all-reduces gives the all-reduce\'s bits');
  registerCommHook({ name: 'api-plain', description: 'x', init: () => undefined, exchange: async () => undefined });
  t.throws(() => registerCommHook({ name: 'fp16', description: 'x', init: () => undefined, exchange: async () => undefined }), /already registered/);
});

t.test('bad hook names and options are named before any thread starts; the CLI flags', async t => {
  await t.rejects(train({ ...base, commHook: 'fp8' }), /communication hook 'fp8' is not registered \(registered: fp16, bf16, powersgd/);
  await t.rejects(train({ ...base, commHook: './nowhere.mjs' }), /config.commHook: .\/nowhere.mjs: no such file/);
  await t.rejects(train({ ...base, commHook: 'powersgd', commHookOptions: { rank: 0 } }), /commHookOptions.rank: must be an integer >= 1/);
  await t.rejects(train({ ...base, commHookOptions: { rank: 2 } }), /commHookOptions: given without commHook/);
  const { config } = parseTrainArgs(['--comm-hook', 'powersgd', '--powersgd-rank', '2', '--powersgd-start-step', '5', '--no-warm-start']);
  t.same({ hook: config.commHook, options: config.commHookOptions }, { hook: 'powersgd', options: { rank: 2, startStep: 5, warmStart: false } });
});
