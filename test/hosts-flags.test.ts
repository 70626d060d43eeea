// Hosts started with different flags (real processes, each host its own `tandem train` joined at a rendezvous on
// 127.0.0.1): both fail at once with BAD_CONFIG naming the flag and both values, instead of waiting for each other in a
// phase one of them never reaches (host 0 in auto's profiling, host 1 in the run) until a timeout that named no cause.
// Every option declared `hosts: 'same'` is compared (another --precision or --lr trained before, each host applying
// another update, the replicas silently apart). And the comparison itself, on resolved configs: what must agree does,
// what may differ (paths, outputs) does not count.
import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { resolveConfig } from '../src/config.js';
import { flagDifferences, hostFlags } from '../src/world/host-flags.js';
import type { TrainConfig } from '../src/config-types.js';
import { smallRunArgs } from './fixtures/small-run.js';
import { nativeAddonOrSkip } from './fixtures/native-addon-or-skip.js';
import { bf16Support } from '../src/engine/native/bf16-support.js';

const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const BASE = [...smallRunArgs(), '--hosts', '2', '--stall-timeout-ms', '60000'];
const COMMON: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [8, 8, 1],
  classes: 4,
  datasetSize: 64,
  batch: 8,
  steps: 3,
};

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/** Host r's `tandem train` with its own flags; its exit code, output and seconds taken. */
async function host(
  rank: number,
  port: number,
  flags: string[],
): Promise<{ code: number; out: string; seconds: number }> {
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [CLI, 'train', ...BASE, '--host-rank', String(rank), '--rendezvous', `127.0.0.1:${port}`, ...flags],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.on('data', d => {
    out += String(d);
  });
  child.stderr!.on('data', d => {
    out += String(d);
  });
  const [code] = (await once(child, 'close')) as [number];
  return { code, out, seconds: (performance.now() - started) / 1000 };
}

t.test(
  'the flags compared: the same command agrees; steps, strategy or auto differ; paths and outputs do not count',
  async t => {
    const flags = async (c: TrainConfig, auto = false) => hostFlags(await resolveConfig(c), auto);
    const base = await flags(COMMON);
    t.same(
      flagDifferences(
        base,
        await flags({ ...COMMON, out: '/tmp/elsewhere', stallTimeoutMs: 5000, loaderThreads: 1 }),
        'here',
        'there',
      ),
      [],
      'outputs, timeouts, loaders: no difference',
    );
    t.same(flagDifferences(base, await flags({ ...COMMON, steps: 4 }), 'here', 'there'), ['steps: 3 here, 4 there']);
    t.same(flagDifferences(base, await flags({ ...COMMON, strategy: 'two-group', splitLayer: 1 }), 'here', 'there'), [
      'strategy: "sequential" here, "two-group" there',
      'splitLayer: none here, 1 there',
    ]);
    t.same(
      flagDifferences(base, await flags({ ...COMMON, strategy: 'auto' }, true), 'here', 'there'),
      ['strategy: "sequential" here, "auto" there'],
      "auto against a strategy: the strategy alone (the hook is auto's to pick)",
    );
    t.same(
      flagDifferences(
        await flags({ ...COMMON, strategy: 'auto' }, true),
        await flags({ ...COMMON, strategy: 'auto', commHook: 'auto' }, true),
        'here',
        'there',
      ),
      [],
      'auto with and without --comm-hook auto as host 0 decides: the same',
    );
    const cosine = await flags({ ...COMMON, lrSchedule: 'cosine', warmupSteps: 1 });
    t.same(flagDifferences(base, await flags({ ...COMMON, lrSchedule: 'constant' }), 'here', 'there'), []);
    t.same(
      flagDifferences(cosine, await flags({ ...COMMON, lrSchedule: 'cosine:0.001', warmupSteps: 1 }), 'here', 'there'),
      [
        'lrSchedule: {"kind":"cosine","floor":0,"steps":3,"warmupSteps":1,"warmupFrom":0} here, ' +
          '{"kind":"cosine","floor":0.001,"steps":3,"warmupSteps":1,"warmupFrom":0} there',
      ],
      'another learning-rate schedule differs',
    );
    const fn = (k: number) => 0.01 / (k + 1);
    t.same(
      flagDifferences(
        await flags({ ...COMMON, lrSchedule: fn }),
        await flags({ ...COMMON, lrSchedule: (k: number) => 0.01 / (k + 1) }),
        'here',
        'there',
      ),
      [],
      "a function schedule is compared by its values' digest: the same values agree",
    );
    t.match(
      flagDifferences(
        await flags({ ...COMMON, lrSchedule: fn }),
        await flags({ ...COMMON, lrSchedule: () => 0.01 }),
        'here',
        'there',
      ),
      [/^lrSchedule: \{"kind":"function","digest":"[0-9a-f]{16}".* here, .*"digest":"[0-9a-f]{16}".* there$/],
      'other values differ',
    );
    t.same(flagDifferences(base, await flags({ ...COMMON, accumulate: 2 }), 'here', 'there'), [
      'accumulate: 1 here, 2 there',
    ]);
    t.same(flagDifferences(base, await flags({ ...COMMON, shuffle: false }), 'here', 'there'), [
      'shuffle: true here, false there',
    ]);
  },
);

t.test('what changes the math is compared: precision, optimizer, batch norm, NaN rule, hook options', async t => {
  const flags = async (c: TrainConfig) => hostFlags(await resolveConfig({ backend: 'cpu', ...c }), false);
  const base = await flags(COMMON);
  const differ = async (c: TrainConfig) => flagDifferences(base, await flags({ ...COMMON, ...c }), 'here', 'there');
  t.same(await differ({ lr: 0.05 }), ['lr: 0.01 here, 0.05 there'], 'another learning rate');
  t.same(await differ({ lr: 0.01, seed: 1, devices: 2 }), [], 'a default given explicitly is the same value');
  t.same(await differ({ momentum: 0.5 }), ['momentum: 0.9 here, 0.5 there'], 'another momentum');
  t.same(await differ({ precision: 'fp32' }), [], 'fp32 is the default');
  t.same(await differ({ batchNorm: 'local' }), ['batchNorm: "sync" here, "local" there']);
  t.same(await differ({ onNan: 'skip-step' }), ['onNan: "error" here, "skip-step" there']);
  t.same(await differ({ replicaCheckEvery: 0 }), ['replicaCheckEvery: 100 here, 0 there']);
  t.same(
    await differ({ keepBest: 2, out: '/tmp/x' }),
    ['epoch logs: false here, true there'],
    'K best epochs kept on one host: epoch logs, which gather every host at each epoch end, on that host alone',
  );
  t.same(await differ({ resume: '/tmp/a' }), ['resume: false here, true there'], 'whether it resumes, not from where');
  t.same(
    flagDifferences(
      await flags({ ...COMMON, commHook: 'powersgd', commHookOptions: { rank: 2 } }),
      await flags({ ...COMMON, commHook: 'powersgd', commHookOptions: { rank: 4 } }),
      'here',
      'there',
    ),
    ['commHookOptions.rank: 2 here, 4 there'],
    "a hook's own option, by its path",
  );
  t.same(
    await differ({ out: '/tmp/x', tensorboard: '/tmp/tb', forwardWait: 'step', loaderThreads: 1 }),
    [],
    'own options: outputs, when forward waits, loader threads',
  );
});

/** Host 1 multiplying in bf16, host 0 in fp32: where the native engine here multiplies in bf16. */
function precisionCase(): [string, string[], string[], RegExp][] | undefined {
  const addon = nativeAddonOrSkip();
  const refusal = addon ? bf16Support(addon).refusal : 'no native engine';
  if (refusal === undefined)
    return [
      [
        '--precision bf16 on host 1 alone',
        [],
        ['--precision', 'bf16'],
        /precision: ("fp32" on host 0, "bf16" on host 1|"bf16" on host 1, "fp32" on host 0)/,
      ],
    ];
  t.comment(`--precision bf16 on host 1: skipped (${refusal})`);
  return undefined;
}

if (glooAddonOrSkip()) {
  for (const [what, flags0, flags1, expected] of [
    [
      '--strategy auto on host 0 alone',
      ['--strategy', 'auto', '--steps', '3'],
      ['--strategy', 'sequential', '--steps', '3'],
      /strategy: "(auto|sequential)" on host [01], "(auto|sequential)" on host [01]/,
    ],
    ['other --steps', ['--steps', '3'], ['--steps', '4'], /steps: [34] on host [01], [34] on host [01]/],
    ['--no-shuffle on host 1 alone', [], ['--no-shuffle'], /shuffle: (true|false) on host [01], (true|false) on host/],
    [
      'another --lr on host 1',
      [],
      ['--lr', '0.05'],
      /lr: (0\.01 on host 0, 0\.05 on host 1|0\.05 on host 1, 0\.01 on host 0)/,
    ],
    ...(precisionCase() ?? []),
  ] as const) {
    t.test(`hosts started with ${what}: both fail at once, naming the flag`, async t => {
      const port = await freePort();
      const runs = await Promise.all([host(0, port, [...flags0]), host(1, port, [...flags1])]);
      for (const [rank, run] of runs.entries()) {
        t.equal(run.code, 1, `host ${rank} exits 1`) || t.comment(run.out);
        t.match(run.out, expected, `host ${rank} names the difference`);
        t.match(run.out, /every host runs the same command/, `host ${rank} says what to do`);
        t.notMatch(run.out, /\bstep 1\b/, `host ${rank} trained no step`);
        t.comment(`host ${rank} ended in ${run.seconds.toFixed(1)} s (the stall timeout is 60 s)`);
      }
    });
  }
}
