// A device's step replayed (src/actors/step-replay.ts): trained with the recorded kernels and without
// (TANDEM_STEP_REPLAY=off), a run gives the same bits: every step's loss and accuracy, the replicas' checksum.
// - alexnet-mini (fused convolutions, pooled relus, biases, the fused loss) in fp32 on 1 and 2 devices, in bf16 where
//   oneDNN has bf16 kernels here, and past a check of the kept recording against a fresh one (REVERIFY_EVERY steps);
// - how many steps replay: all but the two recorded first and the one each check records;
// - a model with Dropout replays, each step drawing its own masks (the mask is a kernel whose seed is the step's);
// - BatchNormalization replays (its statistics and gradient are kernels, its moving averages a hook run again), sync
//   and local; the moving averages are in the replica checksum;
// - a model whose random layers draw outside kernels (Gaussian noise: values that differ each step) never replays,
//   and gives the same bits;
// - method B (local-head) never replays;
// - a partial last batch runs through tfjs, the others replay.
// Skipped when the addon is not built (failed with TANDEM_REQUIRE_NATIVE=1).
import t, { type Test } from 'tap';
import { nativeAddonOrSkip } from './fixtures/native-addon-or-skip.js';
import { startTraining, type TrainConfig } from '../src/index.js';
import { REVERIFY_EVERY } from '../src/actors/step-replay.js';

const fixtureModel = (file: string) => new URL(`../../test/fixtures/models/${file}`, import.meta.url).pathname;

const addon = nativeAddonOrSkip();
if (addon) registerTests(addon.bf16Support().implementation !== '');

interface Outcome {
  history: { loss: number; accuracy: number }[];
  checksum: string;
  replayed: number;
  /** The non-trainable weights' bits (BatchNormalization's moving statistics). */
  state: number[][];
}

async function train(replay: 'on' | 'off', config: Partial<TrainConfig>): Promise<Outcome> {
  process.env.TANDEM_STEP_REPLAY = replay;
  try {
    const run = startTraining({
      ...{ model: 'alexnet-mini', data: 'synthetic-images', imageSize: [16, 16, 3], classes: 10, datasetSize: 256 },
      ...{ batch: 32, steps: 8, backend: 'native', optimizer: 'sgd', lr: 0.05, momentum: 0.9, seed: 3 },
      ...config,
    } as TrainConfig);
    const s = await run.done;
    const state = s.nonTrainableWeights.map(w => Array.from(new Uint32Array(w.values.slice().buffer)));
    return { history: s.history.map(h => ({ ...h })), checksum: s.replicaChecksum, replayed: s.replayedSteps, state };
  } finally {
    delete process.env.TANDEM_STEP_REPLAY;
  }
}

function registerTests(bf16: boolean) {
  const same = async (t: Test, config: Partial<TrainConfig>, replayed: (steps: number) => number) => {
    const on = await train('on', config);
    const off = await train('off', config);
    const steps = config.steps ?? 8;
    t.equal(off.replayed, 0, 'off: no step replayed');
    t.equal(on.replayed, replayed(steps), 'on: the steps that replay');
    t.same(on.history, off.history, 'every step: the same loss and accuracy bits');
    t.equal(on.checksum, off.checksum, 'the same replica bits');
    t.same(on.state, off.state, 'the same non-trainable weights (moving statistics)');
    t.ok(new Set(on.history.map(h => h.loss)).size > 1, 'the loss moved: training happened');
  };
  const allButRecorded = (steps: number) => steps - 2;

  t.test('alexnet-mini, fp32, 1 device', t => same(t, { devices: 1 }, allButRecorded));
  t.test('alexnet-mini, fp32, 2 devices', t => same(t, { devices: 2 }, allButRecorded));
  t.test('alexnet-mini, bf16, 2 devices', { skip: !bf16 && 'no bf16 kernel here' }, t =>
    same(t, { devices: 2, precision: 'bf16' }, allButRecorded),
  );
  t.test('past a check of the kept recording', t =>
    same(t, { devices: 1, steps: REVERIFY_EVERY + 6, imageSize: [8, 8, 3] }, steps => steps - 3),
  );
  t.test("Dropout (tfjs-examples mnist-node): each step's own masks, replayed", t =>
    same(t, { model: 'mnist-node', imageSize: [28, 28, 1], steps: 6 }, allButRecorded),
  );
  t.test('BatchNormalization, sync on 2 devices (resnet-mini): the moving averages too', async t => {
    await same(t, { model: 'resnet-mini', devices: 2, steps: 6 }, allButRecorded);
    const { state } = await train('on', { model: 'resnet-mini', devices: 2, steps: 2 });
    const moved = await train('on', { model: 'resnet-mini', devices: 2, steps: 6 });
    t.notSame(moved.state, state, 'the moving statistics moved in the replayed steps');
  });
  t.test('BatchNormalization, local, and a depthwise network (mobilenet-mini)', t =>
    same(t, { model: 'mobilenet-mini', devices: 2, steps: 6, batchNorm: 'local' }, allButRecorded),
  );
  t.test('Gaussian noise and dropouts drawn outside kernels: never replayed', t =>
    same(t, { model: fixtureModel('random-layers.mjs'), imageSize: [8, 8, 3], steps: 5 }, () => 0),
  );
  t.test('method B (local-head: a loss built from the labels on the host): never replayed', t =>
    same(t, { method: 'local-head', devices: 2, steps: 4 }, () => 0),
  );
  t.test('a partial last batch runs through tfjs', t =>
    // 200 training samples in batches of 32: the 7th batch has 8 samples, the 8th is the next epoch's first
    same(t, { datasetSize: 200, steps: 9, partialBatch: true }, steps => steps - 2 - 1),
  );
}
