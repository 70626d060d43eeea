// Gradient-ready backward against tf.variableGrads: same values (bit for bit),
// every variable exactly once, output layer first, no leaked tensors.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { backwardWithGradientReady } from '../src/engine/gradient-tape.js';
import { installFastGradients } from '../src/engine/fast-gradients.js';
import { BUILTIN_MODELS } from '../src/model/builtin-models.js';
import { float32Bits } from './fixtures/same-bits.js';

function functionalModel() {
  const input = tf.input({ shape: [6, 6, 2] });
  const conv = tf.layers
    .conv2d({
      filters: 4,
      kernelSize: 3,
      padding: 'same',
      activation: 'relu',
      kernelInitializer: tf.initializers.glorotUniform({ seed: 1 }),
      name: 'conv',
    })
    .apply(input) as tf.SymbolicTensor;
  const flat = tf.layers.flatten().apply(conv) as tf.SymbolicTensor;
  const a = tf.layers
    .dense({
      units: 8,
      activation: 'tanh',
      kernelInitializer: tf.initializers.glorotUniform({ seed: 2 }),
      name: 'branch_a',
    })
    .apply(flat) as tf.SymbolicTensor;
  const b = tf.layers
    .dense({ units: 8, kernelInitializer: tf.initializers.glorotUniform({ seed: 3 }), name: 'branch_b' })
    .apply(flat) as tf.SymbolicTensor;
  const sum = tf.layers.add().apply([a, b]) as tf.SymbolicTensor;
  const out = tf.layers
    .dense({ units: 3, kernelInitializer: tf.initializers.glorotUniform({ seed: 4 }), name: 'head' })
    .apply(sum) as tf.SymbolicTensor;
  return tf.model({ inputs: input, outputs: out });
}

async function check(
  t: {
    equal: (a: unknown, b: unknown, m: string) => void;
    same: (a: unknown, b: unknown, m: string) => void;
    ok: (a: unknown, m: string) => void;
  },
  name: string,
  model: tf.LayersModel,
  inputShape: number[],
  classes: number,
) {
  const x = tf.randomUniform([4, ...inputShape], 0, 1, 'float32', 7);
  const y = tf.oneHot(tf.tensor1d([0, 1, 2, 1], 'int32'), classes);
  const vars = model.trainableWeights.map(w => w.read() as tf.Variable);
  const loss = () => tf.losses.softmaxCrossEntropy(y, model.apply(x) as tf.Tensor) as tf.Scalar;
  const expected = tf.variableGrads(loss, vars);
  const expectedValues = vars.map(v => expected.grads[v.name].dataSync().slice());
  tf.dispose([expected.value, ...Object.values(expected.grads)]);

  const before = tf.memory().numTensors;
  const order: number[] = [];
  const got: Float32Array[] = [];
  const value = backwardWithGradientReady(tf, loss, vars, (i, g) => {
    order.push(i);
    got[i] = g.dataSync().slice() as Float32Array;
  });
  value.dispose();
  t.equal(tf.memory().numTensors, before, `${name}: no leaked tensors`);
  t.same(
    [...order].sort((a, b) => a - b),
    vars.map((_, i) => i),
    `${name}: every variable exactly once`,
  );
  vars.forEach((v, i) =>
    t.ok(
      got[i].every((g, j) => g === expectedValues[i][j]),
      `${name}: ${v.name} bit-identical to tf.variableGrads`,
    ),
  );
  return order.map(i => model.trainableWeights[i].originalName.split('/')[0]);
}

t.test('sequential and functional models, cpu with tandem kernels', async t => {
  await tf.setBackend('cpu');
  installFastGradients(tf, 'cpu');
  const seq = BUILTIN_MODELS['alexnet-mini'].factory(tf, {
    inputShape: [8, 8, 1],
    classes: 3,
    seed: 1,
  }) as tf.LayersModel;
  const layers = await check(t, 'alexnet-mini', seq, [8, 8, 1], 3);
  const layerOrder = [...new Set(layers)];
  const modelLayerOrder = [...new Set(seq.trainableWeights.map(w => w.originalName.split('/')[0]))].reverse();
  t.same(layerOrder, modelLayerOrder, `transmission order, output layer first: ${layerOrder.join(' > ')}`);
  const fn = functionalModel();
  const fLayers = [...new Set(await check(t, 'functional', fn, [6, 6, 2], 3))];
  t.equal(fLayers[0], 'head', 'functional: head first');
  t.equal(fLayers[fLayers.length - 1], 'conv', 'functional: conv (the input side) last');
  seq.dispose();
  fn.dispose();
});

t.test('a variable the loss does not use gets zeros; internals check names the fix', async t => {
  const used = tf.variable(tf.tensor1d([1, 2])),
    unused = tf.variable(tf.tensor1d([3]));
  const got: number[][] = [];
  backwardWithGradientReady(
    tf,
    () => used.square().sum(),
    [used, unused],
    (i, g) => {
      got[i] = Array.from(g.dataSync());
    },
  ).dispose();
  t.same(got, [[2, 4], [0]]);
  tf.dispose([used, unused]);
  const fake = { engine: () => ({}), version_core: '9.9.9' } as unknown as typeof tf;
  t.throws(
    () =>
      backwardWithGradientReady(
        fake,
        () => tf.scalar(0),
        [],
        () => {},
      ),
    { code: 'TFJS_INTERNALS', message: /4\.22\.0/ },
  );
});

t.test("the forward saves tensors for the gradient without tfjs's Identity kernel, the same bits", async t => {
  await tf.setBackend('cpu');
  const model = functionalModel();
  const x = tf.randomUniform([4, 6, 6, 2], 0, 1, 'float32', 9);
  const y = tf.oneHot(tf.tensor1d([2, 0, 1, 1], 'int32'), 3);
  const vars = model.trainableWeights.map(w => w.read() as tf.Variable);
  const loss = () => tf.losses.softmaxCrossEntropy(y, model.apply(x) as tf.Tensor) as tf.Scalar;
  const identities = async (f: () => void) => (await tf.profile(f)).kernels.filter(k => k.name === 'Identity').length;
  const got: Float32Array[] = [];
  const before = tf.memory();
  const ours = await identities(() =>
    backwardWithGradientReady(tf, loss, vars, (i, g) => (got[i] = g.dataSync() as Float32Array)).dispose(),
  );
  t.same(
    [tf.memory().numTensors, tf.memory().numBytes],
    [before.numTensors, before.numBytes],
    'no tensor or byte left behind',
  );
  let stock: ReturnType<typeof tf.variableGrads> | undefined;
  const tfjs = await identities(() => void (stock = tf.variableGrads(loss, vars)));
  const plain = await identities(() => void tf.tidy(loss)); // the forward's own (a layer's clone), no tape
  t.equal(ours, plain, `no Identity kernel beyond the forward's own ${plain}`);
  t.ok(tfjs > 10, `tf.variableGrads of the same loss ran ${tfjs}`);
  t.ok(
    vars.every((v, i) => float32Bits(stock!.grads[v.name].dataSync()) === float32Bits(got[i])),
    "every gradient tfjs's bits",
  );
  tf.dispose([stock!.value, ...Object.values(stock!.grads), x, y]);
  model.dispose();
});

t.test('a gradient taken inside the forward (a gradient penalty) keeps what its own gradient needs', async t => {
  await tf.setBackend('cpu');
  const w = tf.variable(tf.tensor2d([0.3, -1.2, 0.8, 0.5, 1.1, -0.4], [3, 2]));
  const x = tf.tensor2d([0.5, -1, 2, 1.5, 0.25, -0.75], [2, 3]);
  // loss = Σ tanh(xW)² + Σ (d Σ tanh(xW) / dx)²: its gradient in W runs through the inner gradient's backward
  const loss = () => {
    const f = (z: tf.Tensor) => tf.sum(tf.tanh(tf.matMul(z, w)));
    const penalty = tf.sum(tf.square(tf.grad(f)(x)));
    return tf.add(tf.sum(tf.square(tf.tanh(tf.matMul(x, w)))), penalty) as tf.Scalar;
  };
  let got: Float32Array | undefined;
  backwardWithGradientReady(tf, loss, [w], (_, g) => (got = g.dataSync() as Float32Array)).dispose();
  const stock = tf.variableGrads(loss, [w]);
  const want = stock.grads[w.name].dataSync() as Float32Array;
  t.same(Array.from(got!), Array.from(want), `second-order gradient equal: ${Array.from(want).map(v => v.toFixed(4))}`);
  tf.dispose([stock.value, stock.grads[w.name], w, x]);
});
