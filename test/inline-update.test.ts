// A world of one device on one CPU applies its update on its compute thread (src/actors/inline-update.ts). Forced on
// and off (TANDEM_UPDATE_ON_COMPUTE), a run gives the same bits: every step's loss and accuracy, the replicas'
// checksum, the skipped updates; the timeline's update spans say which thread applied them.
// - the cpu engine with SGD, Adam with a learning-rate schedule, gradient accumulation;
// - onNan 'skip-step' on a batch whose forward overflows: the same updates skipped;
// - a checkpoint written and resumed with the update on the compute thread: the uninterrupted run's bits;
// - the native engine in fp32, and in bf16 where oneDNN has bf16 kernels here (its bf16 copy of the parameters);
// - where it applies: one device, one process, one CPU, nothing that needs the comm thread.
import t, { type Test } from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTraining, type TrainConfig } from '../src/index.js';
import { updatesOnCompute } from '../src/actors/inline-update.js';
import { nativeAddonOrSkip } from './fixtures/native-addon-or-skip.js';

const fixture = (file: string) => new URL(`../../test/fixtures/${file}`, import.meta.url).pathname;

interface Outcome {
  history: { loss: number; accuracy: number }[];
  checksum: string;
  skipped: [number, number][];
  /** The threads whose spans show an update. */
  appliedOn: string[];
}

const BASE: TrainConfig = {
  ...{ model: 'mlp', data: 'synthetic-images', imageSize: [6, 6, 1], datasetSize: 240, classes: 4, batch: 12 },
  ...{ steps: 6, devices: 1, backend: 'cpu', optimizer: 'sgd', lr: 0.05, momentum: 0.9, seed: 5 },
};

async function train(where: 'on' | 'off', config: Partial<TrainConfig>): Promise<Outcome> {
  process.env.TANDEM_UPDATE_ON_COMPUTE = where;
  try {
    const run = startTraining({ ...BASE, ...config } as TrainConfig);
    const appliedOn = new Set<string>();
    run.timeline$.subscribe(s => {
      if (s.kind === 'apply') appliedOn.add(s.thread);
    });
    const s = await run.done;
    return {
      history: s.history.map(h => ({ loss: h.loss, accuracy: h.accuracy })),
      checksum: s.replicaChecksum,
      skipped: s.skippedUpdates.map(u => [u.step, u.group]),
      appliedOn: [...appliedOn].sort(),
    };
  } finally {
    delete process.env.TANDEM_UPDATE_ON_COMPUTE;
  }
}

async function same(t: Test, config: Partial<TrainConfig>): Promise<Outcome> {
  const on = await train('on', config);
  const off = await train('off', config);
  t.same(on.appliedOn, ['compute'], 'on: every update applied on the compute thread');
  t.same(off.appliedOn, ['comm'], 'off: every update applied on the comm thread');
  t.same(on.history, off.history, 'every step: the same loss and accuracy bits');
  t.equal(on.checksum, off.checksum, 'the same replica bits');
  t.same(on.skipped, off.skipped, 'the same updates skipped');
  t.ok(new Set(on.history.map(h => h.loss)).size > 1, 'the loss moved: training happened');
  return on;
}

t.test('the cpu engine, SGD with momentum', t => same(t, {}));
t.test('Adam with a cosine learning-rate schedule, two exchange groups', t =>
  same(t, { optimizer: 'adam', lr: 0.01, momentum: undefined, lrSchedule: 'cosine', strategy: 'per-layer' }),
);
t.test('gradient accumulation', t => same(t, { accumulate: 3 }));

t.test("onNan 'skip-step': a batch whose forward overflows skips the same updates", async t => {
  const { skipped } = await same(t, {
    data: fixture('overflowing-sample.mjs'),
    ...{ imageSize: undefined, classes: undefined, datasetSize: undefined },
    onNan: 'skip-step',
    steps: 8,
  });
  t.ok(skipped.length > 0, 'some update was skipped: the overflowing sample was trained on');
});

t.test(
  'a checkpoint written and resumed with the update on the compute thread gives the uninterrupted bits',
  async t => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tandem-inline-'));
    const full = await train('on', { steps: 6, checkpointEvery: 3, checkpointDir: dir });
    const resumed = await train('on', { steps: 6, resume: path.join(dir, 'checkpoint-000000003.tandem') });
    t.same(resumed.history, full.history.slice(3), 'steps 4-6: the same loss and accuracy bits');
    t.equal(resumed.checksum, full.checksum, 'the same replica bits');
  },
);

const addon = nativeAddonOrSkip();
const nativeSkip = !addon && 'the native addon is not built';
t.test('the native engine, fp32', { skip: nativeSkip }, t =>
  same(t, { backend: 'native', model: 'alexnet-mini', imageSize: [8, 8, 3], batch: 16 }),
);
const bf16Skip = nativeSkip || (addon?.bf16Support().implementation === '' && 'no bf16 kernel here');
t.test('the native engine, bf16 (the bf16 copy of the parameters)', { skip: bf16Skip }, t =>
  same(t, { backend: 'native', model: 'alexnet-mini', imageSize: [8, 8, 3], batch: 16, precision: 'bf16' }),
);

t.test('where it applies', async t => {
  const cfg = {
    devices: 1,
    topology: { processes: 1, process: 0, localDevices: 1 },
    exchange: { order: 'ready' as const },
    plugins: [] as string[],
    localUpdate: 'replica' as const,
  };
  delete process.env.TANDEM_UPDATE_ON_COMPUTE;
  t.equal(updatesOnCompute(cfg, false, 1), true, 'one device, one process, one CPU');
  t.equal(updatesOnCompute(cfg, false, 2), false, 'a second CPU: the comm thread updates beside backward');
  t.equal(updatesOnCompute({ ...cfg, devices: 2, topology: { ...cfg.topology, localDevices: 2 } }, false, 1), false);
  t.equal(updatesOnCompute({ ...cfg, topology: { ...cfg.topology, processes: 2 } }, false, 1), false, 'two hosts');
  t.equal(updatesOnCompute(cfg, true, 1), false, 'elastic: hosts may join');
  t.equal(updatesOnCompute({ ...cfg, exchange: { order: 'priority', chunkFloats: 64 } }, false, 1), false);
  t.equal(updatesOnCompute({ ...cfg, plugins: ['x.js'] }, false, 1), false, 'a plugin probes the comm thread');
  t.equal(updatesOnCompute({ ...cfg, link: { bandwidthGbps: 1, latencyMs: 0 } as never }, false, 1), false);
  t.equal(updatesOnCompute({ ...cfg, commHook: {} as never }, false, 1), false, 'a communication hook');
  process.env.TANDEM_UPDATE_ON_COMPUTE = 'on';
  t.equal(updatesOnCompute(cfg, false, 2), true, 'forced on');
  t.equal(updatesOnCompute({ ...cfg, devices: 2 }, false, 2), false, 'forced on: still one device only');
  process.env.TANDEM_UPDATE_ON_COMPUTE = 'off';
  t.equal(updatesOnCompute(cfg, false, 1), false, 'forced off');
  delete process.env.TANDEM_UPDATE_ON_COMPUTE;
});
