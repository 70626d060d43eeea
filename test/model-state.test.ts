// Every weight of the model is the run's, not only the trainable ones: frozen layers start from device 0's
// values on every device; BatchNormalization (sync, the default) gives what one engine gives on the global
// batch, moving statistics included; local mode keeps the devices' moving statistics identical; a
// checkpoint holds the moving statistics, so resuming gives the bits of the uninterrupted run.
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { train, trainReference, type TrainConfig, type TrainSummary } from '../src/index.js';
import { worstDifference } from './fixtures/weights-difference.js';

const model = (name: string) => fileURLToPath(new URL(`../../test/fixtures/models/${name}.mjs`, import.meta.url));
const transportPlugin = fileURLToPath(new URL('./fixtures/message-port-transport.js', import.meta.url));
const backend = process.env.TANDEM_BACKEND as TrainConfig['backend'] | undefined;

const images: TrainConfig = {
  data: 'synthetic-images',
  imageSize: [8, 8, 3],
  classes: 4,
  datasetSize: 96,
  batch: 12,
  steps: 3,
  optimizer: 'sgd',
  lr: 0.05,
  momentum: 0.9,
  seed: 7,
  backend,
};

t.test(
  "a frozen layer initialised at random on every engine starts from device 0's values on every device",
  async t => {
    const cfg: TrainConfig = { ...images, model: model('frozen-random'), imageSize: [6, 6, 1] };
    const run = await train({ ...cfg, devices: 2 });
    t.ok(
      run.nonTrainableIdentical,
      'both devices end with the same frozen weights (they never change: so they started the same)',
    );
    t.same(
      run.nonTrainableWeights.map(w => w.name),
      ['frozen/kernel', 'frozen/bias'],
    );
    const ref = await trainReference({ ...cfg, devices: 1 }, { initialWeights: run.nonTrainableWeights });
    const worst = worstDifference(run.weights, ref.weights);
    t.ok(
      worst < 1e-5,
      `2 devices = one engine started from device 0's frozen values: max |difference| ${worst.toExponential(2)} < 1e-5`,
    );
  },
);

/** bn-convnet, batchNorm sync, on 2 devices: run once, for the sync test, as the local test's contrast and as the
 * uninterrupted run of the checkpoint test (it writes a checkpoint at step 2; writing one changes no bit: the
 * random-layers test below). */
const convnetDir = mkdtempSync(path.join(os.tmpdir(), 'tandem-bn-'));
let convnetOnTwo: Promise<TrainSummary> | undefined;
const syncConvnetOnTwo = () =>
  (convnetOnTwo ??= train({
    ...images,
    model: model('bn-convnet'),
    devices: 2,
    checkpointEvery: 2,
    checkpointDir: convnetDir,
  }));

// The device counts' paths on the plain convnet; the residual model (another graph, the same statistics' exchange) on
// 3.
for (const [name, counts] of [
  ['bn-convnet', [1, 2, 3]],
  ['bn-residual', [3]],
] as const) {
  t.test(
    `${name}, batchNorm sync: ${counts.join(', ')} device(s) = one engine on the global batch, moving statistics ` +
      `included`,
    async t => {
      const cfg: TrainConfig = { ...images, model: model(name) };
      const ref = await trainReference({ ...cfg, devices: 1 });
      for (const devices of counts) {
        const run =
          name === 'bn-convnet' && devices === 2 ? await syncConvnetOnTwo() : await train({ ...cfg, devices });
        const params = worstDifference(run.weights, ref.weights);
        const moving = worstDifference(run.nonTrainableWeights, ref.nonTrainableWeights);
        t.ok(params < 1e-5, `${devices} device(s): max |param - reference| = ${params.toExponential(2)} < 1e-5`);
        t.ok(
          moving < 1e-5,
          `${devices} device(s): max |moving statistic - reference| = ${moving.toExponential(2)} < 1e-5`,
        );
        t.ok(run.nonTrainableIdentical, `${devices} device(s): every device holds the same moving statistics`);
        t.ok(
          run.nonTrainableWeights.some(w => w.name.endsWith('moving_mean') && w.values.some(v => v !== 0)),
          'the moving means moved',
        );
      }
    },
  );
}

t.test(
  'batchNorm local: per-device statistics (not one engine), moving statistics identical on every device',
  async t => {
    const cfg: TrainConfig = { ...images, model: model('bn-convnet'), devices: 2 };
    const local = await train({ ...cfg, batchNorm: 'local' });
    const sync = await syncConvnetOnTwo(); // = train(cfg)
    t.ok(local.nonTrainableIdentical, "the devices' moving statistics are bit-identical after training");
    t.ok(worstDifference(local.weights, sync.weights) > 1e-6, 'local statistics train differently from global ones');
    const viaPorts = await train({ ...cfg, batchNorm: 'local', transport: 'message-port', plugins: [transportPlugin] });
    t.ok(
      viaPorts.nonTrainableIdentical,
      'the same through a transport that cannot block (the averaging waits asynchronously)',
    );
    await t.rejects(train({ ...cfg, transport: 'message-port', plugins: [transportPlugin] }), {
      code: 'BAD_CONFIG',
      message: /BatchNormalization layers \(bn1, bn2\).*batchNorm: 'local'/,
    });
  },
);

t.test(
  "a checkpoint holds the moving statistics: resuming a BatchNormalization model gives the uninterrupted run's bits",
  async t => {
    const whole = await syncConvnetOnTwo(); // 3 steps, a checkpoint at step 2
    const resumed = await train({
      ...images,
      model: model('bn-convnet'),
      devices: 2,
      resume: path.join(convnetDir, 'checkpoint-000000002.tandem'),
    });
    t.equal(resumed.firstStep, 3);
    t.equal(worstDifference(resumed.weights, whole.weights), 0, 'parameters: the same bits');
    t.equal(
      worstDifference(resumed.nonTrainableWeights, whole.nonTrainableWeights),
      0,
      'moving statistics: the same bits',
    );
  },
);

t.test('random layers draw from (seed, device, step): a run repeats bit for bit, and so does its resume', async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-dropout-'));
  const cfg: TrainConfig = { ...images, model: model('random-layers'), imageSize: [6, 6, 1], devices: 2 };
  const first = await train(cfg);
  // the same run (writing checkpoints changes no bit)
  const again = await train({ ...cfg, checkpointEvery: 2, checkpointDir: dir });
  t.equal(worstDifference(again.weights, first.weights), 0, 'the same run twice: the same bits');
  const resumed = await train({ ...cfg, resume: path.join(dir, 'checkpoint-000000002.tandem') });
  t.equal(
    worstDifference(resumed.weights, first.weights),
    0,
    'resumed at step 2: the same bits as the uninterrupted run',
  );
});
