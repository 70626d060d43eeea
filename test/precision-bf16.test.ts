// Training in precision bf16 (native engine): refused before any thread starts where it cannot run (a CPU without
// amx_bf16 / avx512_bf16, tested by masking the detection with TANDEM_CPUINFO; another engine); where it runs, the
// replicas of 2 devices stay bit-identical, the weights are float32 and differ from an fp32 run's by bf16's rounding
// only, a resume is exact, and 2 hosts (real processes, gloo over loopback) give one process's bits.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { train, TandemError, type RunEvent, type TrainConfig } from '../src/index.js';
import { checkConfig } from '../src/config/check-config.js';
import { loadNativeAddon, requireNativeAddon } from '../src/engine/native/native-addon.js';
import { bf16Support, parseCpuinfo } from '../src/engine/native/bf16-support.js';
import { nativeAddonOrSkip } from './fixtures/native-addon-or-skip.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { killAllTandems, summaryOf, tandem } from './fixtures/tandem-lines.js';
import { smallRunArgs } from './fixtures/small-run.js';

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'tandem-bf16-'));
const BASE: TrainConfig = {
  model: 'alexnet-mini',
  data: 'synthetic-images',
  imageSize: [8, 8, 1],
  classes: 4,
  datasetSize: 96,
  batch: 8,
  devices: 2,
  backend: 'native',
  seed: 5,
  optimizer: 'sgd',
  momentum: 0.9,
  lr: 0.05,
};
t.teardown(killAllTandems);

t.test('precision is checked before any thread starts: another engine, an unknown value', async t => {
  t.throws(() => checkConfig({ ...BASE, backend: 'cpu', precision: 'bf16' }), {
    code: 'PRECISION_UNAVAILABLE',
    message: /precision bf16 runs on the native engine only \(backend 'cpu'.*use --backend native, or --precision fp32/,
  });
  t.throws(() => checkConfig({ ...BASE, precision: 'fp16' as 'bf16' }), { code: 'BAD_CONFIG', message: /precision/ });
  t.equal(checkConfig({ ...BASE, backend: 'cpu' }).fields.precision, 'fp32', 'fp32 is the default');
});

t.test('a CPU without amx_bf16 or avx512_bf16 is refused, naming the missing instructions', async t => {
  if (!nativeAddonOrSkip()) return;
  const dir = tmp();
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const text = readFileSync('/proc/cpuinfo', 'utf8');
  const masked = text.replace(/\b(amx_bf16|avx512_bf16)\b/g, '');
  const file = path.join(dir, 'cpuinfo');
  writeFileSync(file, masked.includes('flags') ? masked : 'model name\t: Test CPU\nflags\t\t: fpu sse2 avx2\n');
  t.same(
    parseCpuinfo(readFileSync(file, 'utf8')).flags.filter(f => f.endsWith('bf16')),
    [],
    'the mask holds',
  );
  const before = process.env.TANDEM_CPUINFO;
  process.env.TANDEM_CPUINFO = file;
  t.teardown(() => (before === undefined ? delete process.env.TANDEM_CPUINFO : (process.env.TANDEM_CPUINFO = before)));
  const want = { code: 'PRECISION_UNAVAILABLE', message: /AMX-BF16 \(amx_bf16\) or AVX512-BF16 \(avx512_bf16\)/ };
  t.throws(() => checkConfig({ ...BASE, precision: 'bf16' }), want);
  await t.rejects(train({ ...BASE, steps: 2, precision: 'bf16' }), want, 'train() refuses it too');
  const env = { ...process.env, TANDEM_CPUINFO: file, TANDEM_BACKEND: 'native' };
  const cli = tandem(
    ['train', '--model', 'mlp', '--data', 'synthetic-images', '--precision', 'bf16', '--steps', '1'],
    () => {},
    (command, args) => spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env }),
  );
  const ended = await cli.ended;
  t.not(ended.code, 0, 'the CLI exits non-zero');
  t.match(cli.stderr.join('\n'), /avx512_bf16.*--precision fp32/s, 'and says what is missing and the fix');
});

const addon = loadNativeAddon();
const refusal = addon.loaded ? bf16Support(addon.addon).refusal : 'native addon not built';
if (refusal) t.comment(`skipped: bf16 training (${refusal})`);
else registerTrainingTests();

/** ||a - b|| / ||b||. */
function relativeDistance(a: Float32Array, b: Float32Array): number {
  let d = 0,
    n = 0;
  for (let i = 0; i < a.length; i++) {
    d += (a[i] - b[i]) ** 2;
    n += b[i] ** 2;
  }
  return Math.sqrt(d / n);
}

function registerTrainingTests() {
  t.test('bf16 on 2 devices: replicas bit-identical, float32 weights, within rounding of fp32', async t => {
    const cfg = { ...BASE, steps: 4, replicaCheckEvery: 1 };
    const started: string[] = [];
    const onEvent = (e: RunEvent) => void (e.type === 'started' && started.push(e.precision));
    const bf16 = await train({ ...cfg, precision: 'bf16' }, { onEvent });
    const fp32 = await train({ ...cfg, precision: 'fp32' }, { onEvent });
    t.equal(bf16.config.precision, 'bf16');
    // what multiplies, as this machine's detection finds it (the run's header prints it)
    const { implementation, flags } = bf16Support(requireNativeAddon());
    const said = `bf16 (oneDNN ${implementation} on ${flags.join(', ')})`;
    t.same(started, [said, 'fp32'], 'the started event says it');
    t.ok(bf16.nonTrainableIdentical, 'replicas identical (and checked at every step)');
    t.ok(
      bf16.weights.every(w => w.values instanceof Float32Array),
      'weights are float32',
    );
    // Kernels move from their initial values by many rounded products: ~1e-4 here. Biases start at 0 and hold only
    // the sum of bf16-rounded dy over the batch, which cancels: ~0.1 of their small norm after 4 steps.
    bf16.weights.forEach((w, i) => {
      const d = relativeDistance(w.values, fp32.weights[i].values);
      const bound = w.name.endsWith('bias') ? 0.3 : 0.01;
      t.ok(d > 0 && d < bound, `${w.name}: ||bf16 - fp32|| / ||fp32|| = ${d.toExponential(2)} (0 < it < ${bound})`);
    });
    t.ok(Math.abs(bf16.finalLoss - fp32.finalLoss) / fp32.finalLoss < 1e-3, 'the loss follows fp32 within 1e-3');
    t.equal(bf16.wire.commHook, 'none', 'gradients are exchanged in float32 by default');
    const hooked = await train({ ...cfg, precision: 'bf16', commHook: 'bf16' });
    t.equal(hooked.wire.commHook, 'bf16', 'the bf16 comm hook composes with it');
    t.ok(hooked.nonTrainableIdentical && hooked.wire.bytesPerStep < bf16.wire.bytesPerStep, 'half the bytes');
  });

  t.test('resume is exact in bf16', async t => {
    const dir = tmp();
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const cfg = { ...BASE, precision: 'bf16' as const };
    const full = await train({ ...cfg, steps: 4, checkpointEvery: 2, checkpointDir: dir });
    const atTwo = path.join(dir, 'checkpoint-000000002.tandem');
    t.ok(existsSync(atTwo), 'checkpoint written at step 2');
    const resumed = await train({ ...cfg, steps: 4, resume: atTwo });
    t.ok(
      resumed.weights.every((w, i) => w.values.every((v, j) => v === full.weights[i].values[j])),
      '2 + 2 steps = 4 uninterrupted steps, bit for bit',
    );
    await t.rejects(train({ ...BASE, steps: 4, resume: atTwo }), TandemError, 'resuming it in fp32 is refused');
  });

  t.test("the CLI's first and last lines say what multiplied", async t => {
    const { implementation, flags } = bf16Support(requireNativeAddon());
    const args = ['train', ...smallRunArgs({ model: 'alexnet-mini', steps: 1 }), '--precision', 'bf16'];
    const cli = tandem([...args, '--backend', 'native', '--devices', '2']);
    t.equal((await cli.ended).code, 0, 'exit 0');
    const header = `training on 2 device(s), native bf16 (oneDNN ${implementation} on ${flags.join(', ')}), `;
    t.ok(cli.lines[0].startsWith(header), cli.lines[0]);
    t.ok(
      cli.lines.some(l => l.startsWith('done: 1 steps on 2 device(s) (native, bf16), ')),
      'the done line',
    );
  });

  if (glooAddonOrSkip())
    t.test('bf16 across 2 hosts equals one process with 2 devices, bit for bit', async t => {
      const dir = tmp();
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const small = smallRunArgs({ model: 'alexnet-mini', steps: 4 });
      const run = [...small, '--precision', 'bf16', '--backend', 'native', '--json'];
      const launch = tandem(['launch', '--hosts', '2', '--devices', '1', ...run, '--out', path.join(dir, 'hosts')]);
      const one = tandem(['train', '--devices', '2', ...run, '--out', path.join(dir, 'one')]);
      const [h, o] = await Promise.all([launch.ended, one.ended]);
      t.equal(h.code, 0, `launch: ${launch.stderr.join('\n')}`);
      t.equal(o.code, 0, `one process: ${one.stderr.join('\n')}`);
      const single = summaryOf(one.lines);
      for (const r of [0, 1])
        t.equal(summaryOf(launch.lines, `[host ${r}] `).replicaChecksum, single.replicaChecksum, `host ${r}'s replica`);
      t.ok(
        readFileSync(path.join(dir, 'hosts', 'weights.bin')).equals(readFileSync(path.join(dir, 'one', 'weights.bin'))),
        'weights.bin bit-identical',
      );
    });
}
