// Models of several outputs on tandem's fit, on 1, 2 and 3 devices: a classifier head (softmax,
// categoricalCrossentropy) and a regression head (meanSquaredError) on one trunk, `metrics: ['acc']`, y as
// { outputName: Tensor } and as Tensor[], validationSplit 0.25, shuffle off. Without lossWeights: tfjs's own
// model.fit gives the same training History (loss, cls_loss, reg_loss, cls_acc, reg_acc; relative 1e-4) and final
// weights (1e-4). With lossWeights [1, 0.5] (tfjs's compile drops them; tandem weighs the losses as Keras does): the
// reference is model.fit with each loss scaled by its weight inside a loss function of its own — the same weights
// and total loss, its `<output>_loss` the weighted one. The val_ logs against tfjs's model.evaluate of the
// validation samples after each epoch (tfjs's model.fit shifts its own val_ logs of several outputs by one; evaluate
// returns one spurious value first, the rest in metricsNames order).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { fit } from '../src/index.js';
import { values } from './fixtures/fit-case-helpers.js';

await tf.setBackend('cpu');
const N = 48;
const VALIDATION = 12;

type Loss = string | ((y: tf.Tensor, p: tf.Tensor) => tf.Tensor);

function make(losses: Loss[]): tf.LayersModel {
  const input = tf.input({ shape: [6] });
  const h = tf.layers.dense({ units: 8, activation: 'relu' }).apply(input) as tf.SymbolicTensor;
  const cls = tf.layers.dense({ units: 3, activation: 'softmax', name: 'cls' }).apply(h) as tf.SymbolicTensor;
  const reg = tf.layers.dense({ units: 2, name: 'reg' }).apply(h) as tf.SymbolicTensor;
  const m = tf.model({ inputs: input, outputs: [cls, reg] });
  m.compile({ optimizer: tf.train.sgd(0.1), loss: losses as tf.ModelCompileArgs['loss'], metrics: ['acc'] });
  m.setWeights(m.getWeights().map((w, i) => tf.tensor(values(w.size, i + 1), w.shape)));
  return m;
}

function data() {
  const x = tf.tensor2d(values(N * 6, 7), [N, 6]);
  const labels = Array.from({ length: N }, (_, i) => Math.abs(Math.floor(values(6, i)[0] * 3)) % 3);
  const cls = tf.oneHot(tf.tensor1d(labels, 'int32'), 3).toFloat();
  const reg = tf.tensor2d(values(N * 2, 9), [N, 2]);
  return { x, cls, reg };
}

const args = { epochs: 3, batchSize: 12, shuffle: false, verbose: 0 as const, validationSplit: 0.25 };
const relative = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-6);
const KEYS = ['loss', 'cls_loss', 'reg_loss', 'cls_acc', 'reg_acc'];

/** tfjs's model.fit of `losses`: its training History and, per epoch, model.evaluate on the validation samples. */
async function reference(losses: Loss[]) {
  const { x, cls, reg } = data();
  const model = make(losses);
  const val: number[][] = [];
  const [xv, cv, rv] = [x, cls, reg].map(t => t.slice(N - VALIDATION, VALIDATION));
  const evaluate = new tf.CustomCallback({
    onEpochEnd: async () => {
      const out = model.evaluate(xv, [cv, rv], { batchSize: 12 }) as tf.Scalar[];
      val.push(out.slice(1).map(s => s.dataSync()[0])); // the first is spurious (tfjs 4.22)
      tf.dispose(out);
    },
  });
  const h = await model.fit(x, [cls, reg], { ...args, callbacks: [evaluate] });
  return { history: h.history as Record<string, number[]>, val, weights: model.getWeights().map(w => w.dataSync()) };
}

for (const [weights, scale] of [
  [undefined, [1, 1]],
  [
    [1, 0.5],
    [1, 0.5],
  ],
] as const) {
  t.test(`two outputs${weights ? `, lossWeights [${weights.join(', ')}]` : ''}: fit = model.fit`, async t => {
    const scaled: Loss[] = weights
      ? [
          (y, p) => tf.mul(tf.metrics.categoricalCrossentropy(y, p), scale[0]),
          (y, p) => tf.mul(tf.metrics.meanSquaredError(y, p), scale[1]),
        ]
      : ['categoricalCrossentropy', 'meanSquaredError'];
    const ref = await reference(scaled);
    for (const devices of [1, 2, 3]) {
      const { x, cls, reg } = data();
      const model = make(['categoricalCrossentropy', 'meanSquaredError']);
      const y = devices === 2 ? [cls, reg] : { cls, reg };
      const h = await fit(model, x, y, {
        ...args,
        ...(weights ? { lossWeights: [...weights] } : {}),
        devices,
        backend: 'cpu',
      });
      const got = h.history as Record<string, number[]>;
      t.same(Object.keys(got).sort(), [...KEYS, ...KEYS.map(k => `val_${k}`)].sort(), `${devices}: tfjs's keys`);
      // the reference's <output>_loss is weighted; ours is the output's own loss, as Keras logs it
      const want = (key: string, e: number) =>
        key === 'cls_loss' || key === 'reg_loss'
          ? ref.history[key][e] / scale[key === 'cls_loss' ? 0 : 1]
          : ref.history[key][e];
      let worst = 0;
      for (const key of KEYS) got[key].forEach((v, e) => (worst = Math.max(worst, relative(v, want(key, e)))));
      t.ok(worst < 1e-4, `${devices} device(s): training History within 1e-4 (worst ${worst.toExponential(2)})`);
      let worstVal = 0;
      ref.val.forEach((row, e) =>
        KEYS.forEach((key, i) => {
          const w = i === 1 || i === 2 ? scale[i - 1] : 1;
          worstVal = Math.max(worstVal, relative(got[`val_${key}`][e], row[i] / w));
        }),
      );
      t.ok(worstVal < 1e-4, `${devices} device(s): val_ logs = model.evaluate (worst ${worstVal.toExponential(2)})`);
      let far = 0;
      model
        .getWeights()
        .forEach((w, k) => w.dataSync().forEach((v, i) => (far = Math.max(far, Math.abs(v - ref.weights[k][i])))));
      t.ok(far < 1e-4, `${devices} device(s): final weights within 1e-4 (worst ${far.toExponential(2)})`);
    }
  });
}

t.test('refusals: y not one tensor per output, lossWeights of the wrong length or on one output', async t => {
  const { x, cls, reg } = data();
  const model = make(['categoricalCrossentropy', 'meanSquaredError']);
  await t.rejects(fit(model, x, [cls], { backend: 'cpu' }), { name: 'TandemError', message: /2 outputs \(cls, reg\)/ });
  await t.rejects(fit(model, x, { cls, other: reg }, { backend: 'cpu' }), { message: /other, not an output/ });
  await t.rejects(fit(model, x, [cls, reg], { lossWeights: [1], backend: 'cpu' }), {
    message: /lossWeights must be 2/,
  });
  const single = tf.sequential({ layers: [tf.layers.dense({ units: 1, inputShape: [6] })] });
  single.compile({ optimizer: 'sgd', loss: 'meanSquaredError' });
  await t.rejects(fit(single, x, reg.slice([0, 0], [N, 1]), { lossWeights: [1], backend: 'cpu' }), {
    message: /this model has one/,
  });
});
