// Gradient accumulation: N micro-batches of B per exchange equal one step on the whole batch N·B (1e-5), on 1 and 2
// devices, with the JS and the native update; the refusals name batch, devices and accumulate.
import t from 'tap';
import { train, trainReference, type Span, type TrainConfig } from '../src/index.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';
import { worstDifference } from './fixtures/weights-difference.js';
import { withFault } from './fixtures/fault-plugin.js';

const TOLERANCE = 1e-5;
const base: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  classes: 4,
  datasetSize: 240,
  batch: 24,
  steps: 3,
  seed: 11,
  optimizer: 'sgd',
  lr: 0.1,
  momentum: 0.9,
};

for (const [devices, accumulate, backend] of [
  [1, 3, 'cpu'],
  [2, 3, 'cpu'],
  [2, 2, loadNativeAddon().loaded ? 'native' : 'cpu'],
] as const) {
  t.test(
    `${devices} device(s), ${backend}: ${accumulate} micro-batches of ${24 / devices / accumulate} per device ` +
      '= one step of 24',
    async t => {
      const cfg: TrainConfig = { ...base, devices, backend };
      const whole = await train(cfg);
      const spans: Span[] = [];
      const micro = await train({ ...cfg, accumulate }, { onSpans: s => spans.push(...s) });
      const earlier = spans.filter(s => s.step === 2 && s.device === 0 && s.name === 'backward micro-batch');
      t.equal(earlier.length, accumulate - 1, 'step 2 on device 0: the backward of each micro-batch before the last');
      t.equal(micro.config.accumulate, accumulate);
      const d = worstDifference(micro.weights, whole.weights);
      t.ok(d <= TOLERANCE, `max |Δ| to the whole-batch run ${d.toExponential(2)} ≤ ${TOLERANCE}`);
      const ref = await trainReference(cfg);
      const r = worstDifference(micro.weights, ref.weights);
      t.ok(r <= TOLERANCE, `max |Δ| to the one-engine reference (batch 24) ${r.toExponential(2)} ≤ ${TOLERANCE}`);
      micro.history.forEach((h, i) =>
        t.ok(Math.abs(h.loss - whole.history[i].loss) < 1e-5, `step ${h.step}: loss the mean over the micro-batches`),
      );
      t.same(
        micro.history.map(h => h.accuracy),
        whole.history.map(h => h.accuracy),
        'accuracy counts every micro-batch',
      );
    },
  );
}

t.test('the comparison can fail: one micro-batch alone is another step', async t => {
  const cfg: TrainConfig = { ...base, devices: 1, backend: 'cpu' };
  const micro = await train({ ...cfg, accumulate: 3 });
  // batch 8 trains the first 8 samples of each of the 24 the accumulated run trains: not the same gradient
  const small = await train({ ...cfg, batch: 8 });
  t.ok(worstDifference(micro.weights, small.weights) > 1e-3);
});

t.test("onNan 'skip-step': a NaN loss in the micro-batches skips the step, as without accumulation", async t => {
  const cfg: TrainConfig = {
    ...base,
    devices: 2,
    backend: 'cpu',
    steps: 4,
    onNan: 'skip-step',
    ...withFault({ device: 1, step: 2, phase: 'forward', kind: 'nan' }),
  };
  const whole = await train(cfg);
  const micro = await train({ ...cfg, accumulate: 2 });
  t.same(
    micro.skippedUpdates.map(s => [s.step, s.group, s.variable]),
    [[2, 0, 'the loss (NaN) on device 1']],
    'step 2 skipped, named',
  );
  t.same(
    micro.skippedUpdates.map(s => [s.step, s.group]),
    whole.skippedUpdates.map(s => [s.step, s.group]),
  );
  const d = worstDifference(micro.weights, whole.weights);
  t.ok(d <= TOLERANCE, `the same weights: max |Δ| ${d.toExponential(2)}`);
});

t.test("onNan 'error': a NaN loss in a micro-batch fails the run, naming the device and the step", async t => {
  await t.rejects(
    train({
      ...base,
      devices: 2,
      backend: 'cpu',
      accumulate: 2,
      ...withFault({ device: 1, step: 2, phase: 'forward', kind: 'nan' }),
    }),
    { code: 'NON_FINITE', message: /step 2.*device 1|device 1.*step 2/ },
  );
});

t.test('refusals name batch, devices and accumulate', async t => {
  await t.rejects(train({ ...base, devices: 2, backend: 'cpu', batch: 12, accumulate: 4 }), {
    code: 'BAD_CONFIG',
    message: /config\.accumulate: global batch 12 must be divisible by devices 2 × accumulate 4 = 8 .*a multiple of 8/,
  });
  await t.rejects(train({ ...base, devices: 2, accumulate: 0 }), {
    code: 'BAD_CONFIG',
    message: /config\.accumulate: must be an integer in \[1, 4096\], got 0/,
  });
  await t.rejects(train({ ...base, method: 'local-head', embedding: 8, devices: 2, accumulate: 2 }), {
    code: 'BAD_CONFIG',
    message: /config\.accumulate: applies to method data-parallel only, not local-head/,
  });
  t.equal(parseTrainArgs(['--accumulate', '4']).config.accumulate, 4, '--accumulate N');
});
