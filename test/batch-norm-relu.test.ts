// A BatchNormalization whose output only a relu Activation layer reads (resnet's conv → BN → relu) trains with the
// relu fused into it (src/model/sync-batch-norm.ts): the same bits as the relu apart — losses, every weight, the
// moving statistics — after steps of SGD, on the engines here; inference still applies the relu; and a BN whose
// output something else also reads, or a relu that is the model's output, is left apart.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { trainBatchNormalization } from '../src/model/sync-batch-norm.js';
import { startBackend, type BackendName } from '../src/engine/backend.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { prng } from '../src/data/synthetic-images.js';

type Relu = 'activation' | 'layer';

/** conv → BN → relu, twice, a residual add → relu, a BN read twice, then the classifier. */
function build(relu: Relu): tf.LayersModel {
  const r = prng(7);
  const init = (shape: number[]) =>
    tf.tensor(
      Float32Array.from({ length: shape.reduce((a, b) => a * b) }, () => r() - 0.5),
      shape,
    );
  const act = () => (relu === 'activation' ? tf.layers.activation({ activation: 'relu' }) : tf.layers.reLU());
  type Sym = tf.SymbolicTensor;
  const input = tf.input({ shape: [6, 6, 3] });
  const conv = (x: Sym, filters: number) =>
    tf.layers.conv2d({ filters, kernelSize: 3, padding: 'same', useBias: false }).apply(x) as Sym;
  const bn = (x: Sym) => tf.layers.batchNormalization({ momentum: 0.5 }).apply(x) as Sym;
  let x = act().apply(bn(conv(input, 4))) as Sym;
  const y = act().apply(bn(conv(x, 4))) as Sym;
  x = act().apply(tf.layers.add().apply([x, y]) as Sym) as Sym;
  const shared = bn(conv(x, 4)); // read by the relu and the add: not fused
  x = tf.layers.add().apply([act().apply(shared) as Sym, shared]) as Sym;
  const out = tf.layers.dense({ units: 3 }).apply(tf.layers.flatten().apply(x) as Sym) as Sym;
  const model = tf.model({ inputs: input, outputs: out });
  for (const w of model.weights) if (w.trainable) w.write(init(w.shape as number[]));
  return model;
}

function train(relu: Relu, steps: number) {
  const model = build(relu);
  trainBatchNormalization(tf, model);
  const r = prng(11);
  const x = tf.tensor(
    Float32Array.from({ length: 8 * 6 * 6 * 3 }, () => r() * 2 - 1),
    [8, 6, 6, 3],
  );
  const y = tf.oneHot(tf.tensor1d([0, 1, 2, 0, 1, 2, 0, 1], 'int32'), 3);
  const opt = tf.train.sgd(0.1);
  const losses: number[] = [];
  for (let i = 0; i < steps; i++) {
    const loss = opt.minimize(
      () => tf.losses.softmaxCrossEntropy(y, model.apply(x, { training: true }) as tf.Tensor) as tf.Scalar,
      true,
    )!;
    losses.push(loss.dataSync()[0]);
    loss.dispose();
  }
  const weights = model.weights.map(w => Array.from(w.read().dataSync()));
  const predicted = Array.from((model.predict(x) as tf.Tensor).dataSync());
  return { losses, weights, predicted };
}

const engines: BackendName[] = ['cpu'];
if (loadNativeAddon().loaded) engines.push('native');
else t.ok(process.env.TANDEM_REQUIRE_NATIVE !== '1', 'the native addon is required here');

for (const engine of engines) {
  t.test(`${engine}: a relu fused into its BatchNormalization trains to the bits of the two apart`, async t => {
    await startBackend(tf, engine);
    const fused = train('activation', 4),
      apart = train('layer', 4);
    t.ok(fused.losses.every(Number.isFinite), `losses ${fused.losses.map(l => l.toFixed(4)).join(', ')}`);
    t.ok(fused.losses[3] < fused.losses[0], 'and it learns');
    t.same(fused.losses, apart.losses, 'the same losses');
    t.same(fused.weights, apart.weights, 'the same weights and moving statistics');
    t.same(fused.predicted, apart.predicted, 'inference (the stock layers, relu applied) the same');
  });
}

t.test('which layers fuse: a BN read only by a relu Activation; not one read twice, not a model output', async t => {
  await startBackend(tf, 'cpu');
  const model = build('activation');
  const calls = model.layers.map(l => l.call);
  trainBatchNormalization(tf, model);
  const changed = model.layers.filter((l, i) => l.call !== calls[i]).map(l => l.getClassName());
  t.same(
    changed.sort(),
    ['Activation', 'Activation', 'BatchNormalization', 'BatchNormalization', 'BatchNormalization'],
    'the two relus right after a BN (not the one after the add, nor the one beside the add), and every BN',
  );
  const input = tf.input({ shape: [4] });
  const last = tf.layers.activation({ activation: 'relu' });
  const bnOut = tf.layers.batchNormalization().apply(input) as tf.SymbolicTensor;
  const outputModel = tf.model({ inputs: input, outputs: [last.apply(bnOut) as tf.SymbolicTensor, bnOut] });
  const stock = last.call;
  trainBatchNormalization(tf, outputModel);
  t.equal(last.call, stock, 'a BN that is also the model output is not fused');
});
