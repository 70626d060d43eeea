// Every layer class @tensorflow/tfjs-layers 4.22 registers, tried as a new user would: each either trains on 2 devices
// as one engine does on the global batch (within 1e-5; random layers drawn as the 2 devices draw them), or is refused
// before any thread starts with a TandemError naming the layer and the way out. The registry is enumerated, so a layer
// the sweep misses fails the last test.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { resolveConfig, startBackend, train, trainReference, type TrainConfig } from '../src/index.js';
import { allLayers } from '../src/model/all-layers.js';
import { worstDifference } from './fixtures/weights-difference.js';

const sweep = (name: string) => fileURLToPath(new URL(`../../test/fixtures/models/sweep/${name}.mjs`, import.meta.url));
const backend = process.env.TANDEM_BACKEND as TrainConfig['backend'] | undefined;
const run: TrainConfig = { datasetSize: 16, batch: 4, steps: 2, optimizer: 'sgd', lr: 0.1, seed: 3, backend };
const images: TrainConfig = { ...run, data: 'synthetic-images', imageSize: [4, 4, 2], classes: 3 };
const tokens: TrainConfig = {
  ...run,
  data: fileURLToPath(new URL('../../test/fixtures/tokens.mjs', import.meta.url)),
  classes: 3,
};

/** The sweep's models that train: each joins branches (chains of layers) that also make models of their own. */
const TRAINED: { model: string; data: TrainConfig; branches: { kind: string; names: string[] } }[] = [
  {
    model: 'image-layers',
    data: images,
    branches: { kind: 'image', names: Object.keys(await import(sweep('image-branches'))) },
  },
  {
    model: 'token-layers',
    data: tokens,
    branches: { kind: 'token', names: Object.keys(await import(sweep('token-branches'))) },
  },
];

/**
 * 2 devices against one engine on the global batch: the largest weight difference (trainable and not) and the losses.
 */
async function compare(cfg: TrainConfig): Promise<{ worst: number; losses: number[] }> {
  const ref = await trainReference({ ...cfg, devices: 1 }, { randomLayersAsDevices: 2 });
  const s = await train({ ...cfg, devices: 2 });
  const worst = Math.max(
    worstDifference(s.weights, ref.weights),
    worstDifference(s.nonTrainableWeights, ref.nonTrainableWeights),
  );
  return { worst, losses: s.history.map(h => h.loss) };
}

for (const { model, data, branches } of TRAINED) {
  t.test(`${model} (${branches.names.join(', ')}): 2 devices = one engine on the global batch`, async t => {
    const { worst, losses } = await compare({ ...data, model: sweep(model) });
    t.ok(losses.every(Number.isFinite), `finite losses ${losses.map(l => l.toFixed(4)).join(', ')}`);
    t.ok(worst < 1e-5, `max |weight - reference| = ${worst.toExponential(2)} < 1e-5`);
    if (worst < 1e-5) return;
    for (const name of branches.names) {
      // which branch differs: each as a model of its own
      const branch = `${pathToFileURL(sweep('branch')).href}?${branches.kind}=${name}`;
      const alone = await compare({ ...data, model: branch });
      t.ok(alone.worst < 1e-5, `branch ${name} alone: ${alone.worst.toExponential(2)}`);
    }
  });
}

/**
 * Layers (and layer options) tfjs 4.22 cannot train in a model (its own model.fit throws too), and stateful RNNs:
 * refused, by class and cause.
 */
const REFUSED: [fixture: string, layerClass: string, cause: RegExp][] = [
  ['refused-thresholdedReLU', 'ThresholdedReLU', /runs the kernel Greater, which has no gradient.*trainable: false/],
  ['refused-masking', 'Masking', /runs the kernel NotEqual, which has no gradient.*trainable: false/],
  [
    'refused-conv3dTranspose',
    'Conv3DTranspose',
    /runs the kernel Conv3DBackpropInputV2, which has no gradient.*trainable: false/,
  ],
  ['refused-centerCrop', 'CenterCrop', /runs the kernel CropAndResize, which has no gradient.*trainable: false/],
  [
    'refused-resizing',
    'Resizing',
    /throws in a training forward pass.*x must be rank 3 or 4.*remove the layer, or do its work in the data module/,
  ],
  [
    'refused-randomWidth',
    'RandomWidth',
    /model factory of .* threw.*Negative dimension size caused by adding layer random_width/,
  ],
  ['refused-statefulLstm', 'LSTM', /is stateful.*Build it with stateful: false/],
  // Options of layers that train otherwise:
  [
    'refused-dilatedConv2d',
    'Conv2D',
    /runs the kernel \w*[cC]onv2[dD]\w*, whose gradient throws in TensorFlow.js \(.*dilation rates greater than 1.*trainable: false/,
  ],
  ['refused-causalConv1d', 'Conv1D', /throws in a training forward pass.*CAUSAL padding/],
  [
    'refused-layerNormNoCenter',
    'LayerNormalization',
    /runs the kernel FusedBatchNorm, whose gradient throws.*an input is undefined/,
  ],
  ['refused-batchNormNoScale', 'BatchNormalization', /throws in a training forward pass/],
];

t.test(
  'layers that cannot train are refused before any thread starts, naming the layer, the cause and the way out',
  async t => {
    for (const [fixture, layerClass, cause] of REFUSED) {
      const named = layerClass === 'RandomWidth' ? /random_width/ : new RegExp(`\\(${layerClass}\\)`);
      const error = await resolveConfig({ ...images, model: sweep(fixture) }).then(
        () => undefined,
        (e: unknown) => e as Error & { code?: string },
      );
      // the factory itself throws: the model is bad
      const code = layerClass === 'RandomWidth' ? 'BAD_MODEL' : 'BAD_CONFIG';
      t.equal(error?.code, code, `${layerClass}: ${code}`);
      t.match(error?.message, named, `${layerClass}: the message names the layer`);
      t.match(error?.message, cause, `${layerClass}: cause and way out`);
    }
  },
);

t.test('every layer class tfjs-layers registers is trained or refused by the sweep', async t => {
  await tf.setBackend('cpu');
  const registry = tf.serialization.SerializationMap.getMap().classNameMap as Record<
    string,
    [new (...a: never[]) => unknown, unknown]
  >;
  const Layer = tf.layers.Layer as unknown as abstract new (...a: never[]) => unknown;
  const layerClasses = Object.keys(registry).filter(name => registry[name][0].prototype instanceof Layer);
  const options = { inputShape: [4, 4, 2], classes: 3, seed: 1 };
  const classesOf = async (fixture: string, inputShape: number[]) => {
    const build = (await import(sweep(fixture))).default as (t: typeof tf, o: typeof options) => tf.LayersModel;
    const model = build(tf, { ...options, inputShape });
    type Node = { getClassName(): string; cell?: Node; cells?: Node[] };
    const found = allLayers([model] as never[]) as unknown as Node[];
    const cells = (n: Node | undefined): Node[] => (n ? [n, ...(n.cells ?? []).flatMap(cells)] : []);
    const names = found.flatMap(l => [l, ...cells(l.cell)]).map(l => l.getClassName());
    model.dispose();
    return names;
  };
  const trained = new Set([...(await classesOf('image-layers', [4, 4, 2])), ...(await classesOf('token-layers', [8]))]);
  const refused = new Set(REFUSED.map(([, c]) => c));
  // tf.model() builds the class registered as both 'Model' and its alias 'Functional'.
  if (trained.has('Model')) trained.add('Functional');
  const missing = layerClasses.filter(c => !trained.has(c) && !refused.has(c));
  t.same(missing, [], `${layerClasses.length} layer classes: ${trained.size} in trained models, the rest refused`);
});

t.test('ResizeNearestNeighborGrad (UpSampling2D): a batch gets the gradients of its samples one by one', async t => {
  const { backend: name } = await resolveConfig({ ...images, model: 'mlp' });
  await startBackend(tf, name);
  for (const [size, alignCorners, halfPixelCenters] of [
    [[6, 6], false, false],
    [[2, 2], false, false],
    [[4, 5], true, false],
    [[5, 4], false, true],
  ] as const) {
    const x = tf.randomUniform([3, 3, 3, 2], 0, 1, 'float32', 1),
      w = tf.randomUniform([3, size[0], size[1], 2], 0, 1, 'float32', 2);
    const gradient = (x: tf.Tensor, w: tf.Tensor) =>
      tf.grad(x =>
        tf.sum(tf.mul(tf.image.resizeNearestNeighbor(x as tf.Tensor4D, [...size], alignCorners, halfPixelCenters), w)),
      )(x);
    const batch = gradient(x, w);
    const one = tf.concat([0, 1, 2].map(i => gradient(x.slice(i, 1), w.slice(i, 1))));
    const worst = tf.max(tf.abs(tf.sub(batch, one))).dataSync()[0];
    t.ok(
      worst < 1e-6,
      `${name}, ${size.join('x')}, alignCorners ${alignCorners}, halfPixelCenters ${halfPixelCenters}: |batch - one ` +
        `by one| = ${worst}`,
    );
    tf.dispose([x, w, batch, one]);
  }
});

t.test(
  'MaxPoolGrad and MaxPool3DGrad with tied maxima (the wasm kernels drop or double them): every output gradient ' +
    'reaches one input',
  async t => {
    const { backend: name } = await resolveConfig({ ...images, model: 'mlp' });
    await startBackend(tf, name);
    const cases: [string, tf.Tensor, (x: tf.Tensor) => tf.Tensor][] = [
      ['2D, all equal', tf.fill([2, 4, 4, 3], -1), x => tf.maxPool(x as tf.Tensor4D, 3, 1, 'same')],
      [
        '2D, zeros after a ReLU',
        tf.relu(tf.randomNormal([2, 6, 6, 3], 0, 1, 'float32', 4)),
        x => tf.maxPool(x as tf.Tensor4D, 3, 2, 'same'),
      ],
      ['3D, all equal', tf.fill([1, 2, 4, 4, 2], -1), x => tf.maxPool3d(x as tf.Tensor5D, [1, 3, 3], 1, 'same')],
    ];
    for (const [what, x, pool] of cases) {
      const dy = tf.randomNormal(pool(x).shape, 0, 1, 'float32', 5);
      const dx = tf.grad(x => tf.sum(tf.mul(pool(x), dy)))(x);
      const [sumDx, sumDy] = [tf.sum(dx).dataSync()[0], tf.sum(dy).dataSync()[0]];
      t.ok(Math.abs(sumDx - sumDy) < 1e-4, `${name}, ${what}: Σ dx ${sumDx.toFixed(5)} = Σ dy ${sumDy.toFixed(5)}`);
      tf.dispose([x, dy, dx]);
    }
  },
);
