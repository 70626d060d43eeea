// Layers whose gradients need kernels the wasm engine lacks (depthwise and separable convolutions,
// Embedding) and recurrent layers train on every engine: 3 devices equal one engine on
// the global batch (within 1e-5).
import t from 'tap';
import { fileURLToPath } from 'node:url';
import { train, trainReference, type TrainConfig } from '../src/index.js';
import { worstDifference } from './fixtures/weights-difference.js';

const fixture = (name: string) => fileURLToPath(new URL(`../../test/fixtures/${name}.mjs`, import.meta.url));
const backend = process.env.TANDEM_BACKEND as TrainConfig['backend'] | undefined;

const cases: [string, TrainConfig][] = [
  [
    'DepthwiseConv2D + SeparableConv2D',
    { model: fixture('models/depthwise'), data: 'synthetic-images', imageSize: [8, 8, 3], classes: 4 },
  ],
  ['Embedding + LSTM + GRU', { model: fixture('models/embedding-rnn'), data: fixture('tokens'), classes: 3 }],
];

for (const [what, cfg] of cases) {
  // 3 devices: the layers' gradients on every device, then averaged (the device counts' own paths: lossless.test.ts).
  t.test(`${what}: 3 devices = one engine on the global batch`, async t => {
    const run: TrainConfig = {
      ...cfg,
      datasetSize: 96,
      batch: 12,
      steps: 2,
      optimizer: 'adam',
      lr: 0.01,
      seed: 4,
      backend,
    };
    const ref = await trainReference({ ...run, devices: 1 });
    for (const devices of [3]) {
      const s = await train({ ...run, devices });
      const worst = worstDifference(s.weights, ref.weights);
      t.ok(
        worst < 1e-5,
        `${devices} device(s) on ${s.config.backend}: max |param - reference| = ${worst.toExponential(2)} < 1e-5`,
      );
      t.ok(s.finalLoss < s.history[0].loss + 1, 'trained');
    }
  });
}

t.test(
  'a model that cannot be trained is refused before any thread starts, naming the layer, the kernel and the way out',
  async t => {
    const { resolveConfig } = await import('../src/index.js');
    const base: TrainConfig = {
      data: 'synthetic-images',
      imageSize: [4, 4, 1],
      classes: 3,
      datasetSize: 48,
      batch: 12,
      steps: 2,
      backend,
    };
    await t.rejects(resolveConfig({ ...base, model: fixture('models/strided-slice') }), {
      code: 'BAD_CONFIG',
      message:
        /layer 'every_other' \(EveryOther\) runs the kernel StridedSlice, which has no gradient.*trainable: false.*tf\.slice/,
    });
    await t.rejects(resolveConfig({ ...base, model: fixture('models/two-outputs') }), {
      code: 'SHAPE_MISMATCH',
      message: /1 inputs and 2 outputs; tandem trains models with one input/,
    });
    const s = await train({ ...base, model: fixture('models/strided-slice-first'), devices: 2 });
    t.equal(s.steps, 2, 'the same layer before every trainable weight needs no gradient: it trains');
  },
);

t.test(
  'the BatchNormalization builtins (resnet-mini, mobilenet-mini) on 2 devices = one engine on the global batch',
  async t => {
    for (const model of ['resnet-mini', 'mobilenet-mini']) {
      const cfg: TrainConfig = {
        model,
        data: 'synthetic-images',
        imageSize: [8, 8, 3],
        classes: 4,
        datasetSize: 96,
        batch: 12,
        steps: 2,
        optimizer: 'sgd',
        lr: 0.05,
        seed: 2,
        backend,
      };
      const ref = await trainReference({ ...cfg, devices: 1 });
      const s = await train({ ...cfg, devices: 2 });
      const params = worstDifference(s.weights, ref.weights),
        moving = worstDifference(s.nonTrainableWeights, ref.nonTrainableWeights);
      t.ok(
        params < 1e-5 && moving < 1e-5,
        `${model}: max |param - reference| ${params.toExponential(2)}, |moving statistic - reference| ` +
          `${moving.toExponential(2)}`,
      );
    }
  },
);
