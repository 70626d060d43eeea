// classWeight with a model of two outputs (a softmax classifier and a regression head on one trunk, `acc`): tfjs's
// model.fit weighs each sample's loss of an output by its class's weight before the batch mean, per output, from
// `{ outputName: table }` or an array of one table (or null) per output. tandem's fit on 1, 2 and 3 devices against
// tfjs's own model.fit with the same classWeight: History (relative 1e-4; the weighted loss and cls_loss differ from
// the unweighted run's, so the weights are in) and final weights (1e-4), for one-hot targets (categorical), class ids
// (sparse) and a partial last batch; then the refusals, each naming the output.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { fit } from '../src/index.js';
import { tensorsBesidesOptimizer, values } from './fixtures/fit-case-helpers.js';

await tf.setBackend('cpu');
const N = 44; // batches of 6: seven full and one of 2 (1, 2 and 3 devices split 6 evenly)

function make(sparse: boolean): tf.LayersModel {
  const input = tf.input({ shape: [5] });
  const h = tf.layers.dense({ units: 6, activation: 'relu' }).apply(input) as tf.SymbolicTensor;
  const cls = tf.layers.dense({ units: 3, activation: 'softmax', name: 'cls' }).apply(h) as tf.SymbolicTensor;
  const reg = tf.layers.dense({ units: 2, name: 'reg' }).apply(h) as tf.SymbolicTensor;
  const m = tf.model({ inputs: input, outputs: [cls, reg] });
  const clsLoss = sparse ? 'sparseCategoricalCrossentropy' : 'categoricalCrossentropy';
  m.compile({ optimizer: tf.train.sgd(0.1), loss: [clsLoss, 'meanSquaredError'], metrics: ['acc'] });
  m.setWeights(m.getWeights().map((w, i) => tf.tensor(values(w.size, i + 1), w.shape)));
  return m;
}

function data(sparse: boolean) {
  const x = tf.tensor2d(values(N * 5, 7), [N, 5]);
  const labels = Array.from({ length: N }, (_, i) => Math.abs(Math.floor(values(6, i + 7)[0] * 3)) % 3);
  const ids = tf.tensor1d(labels, 'float32');
  const cls = sparse ? ids : tf.oneHot(tf.tensor1d(labels, 'int32'), 3).toFloat();
  const reg = tf.tensor2d(values(N * 2, 9), [N, 2]);
  return { x, cls, reg };
}

const TABLE = { 0: 1, 1: 3, 2: 0.5 };
const relative = (p: number, q: number) => Math.abs(p - q) / Math.max(Math.abs(q), 1e-6);
const args = { batchSize: 6, epochs: 3, shuffle: false, verbose: 0 as const };

async function tfjsRun(sparse: boolean, classWeight: tf.ModelFitArgs['classWeight']) {
  const model = make(sparse);
  const { x, cls, reg } = data(sparse);
  const h = await model.fit(x, [cls, reg], { ...args, classWeight });
  return { history: h.history as Record<string, number[]>, weights: model.getWeights().map(w => w.dataSync()) };
}

for (const sparse of [false, true]) {
  t.test(`classWeight on the ${sparse ? 'sparse' : 'one-hot'} classifier output = model.fit`, async t => {
    const want = await tfjsRun(sparse, { cls: TABLE });
    const plain = await tfjsRun(sparse, undefined);
    t.ok(relative(want.history.loss[0], plain.history.loss[0]) > 1e-3, 'the weights change tfjs’s loss');
    const forms: [string, tf.ModelFitArgs['classWeight']][] = [
      ['a map', { cls: TABLE }],
      ['an array', [TABLE, null] as unknown as tf.ClassWeight[]],
    ];
    for (const devices of [1, 2, 3])
      for (const [form, classWeight] of devices === 2 ? forms : forms.slice(0, 1)) {
        const model = make(sparse);
        const { x, cls, reg } = data(sparse);
        const tensorsBefore = await tensorsBesidesOptimizer(model);
        const h = await fit(model, x, [cls, reg], { ...args, classWeight, devices, backend: 'cpu' });
        t.equal(
          await tensorsBesidesOptimizer(model),
          tensorsBefore,
          `${devices} device(s): fit leaves no tensor behind`,
        );
        const got = h.history as Record<string, number[]>;
        const what = `${devices} device(s), classWeight ${form}`;
        t.same(Object.keys(got).sort(), Object.keys(want.history).sort(), `${what}: tfjs's keys`);
        let worst = 0;
        for (const [key, v] of Object.entries(want.history))
          v.forEach((w, e) => (worst = Math.max(worst, relative(got[key][e], w))));
        t.ok(worst < 1e-4, `${what}: History within 1e-4 (worst ${worst.toExponential(2)})`);
        let far = 0;
        model
          .getWeights()
          .forEach((w, k) => w.dataSync().forEach((g, i) => (far = Math.max(far, Math.abs(g - want.weights[k][i])))));
        t.ok(far < 1e-4, `${what}: final weights within 1e-4 (worst ${far.toExponential(2)})`);
        tf.dispose([x, cls, reg]);
      }
  });
}

t.test('refusals name the output: a regression output weighed, a class without a weight, the wrong count', async t => {
  const { x, cls, reg } = data(false);
  const run = (classWeight: unknown) =>
    fit(make(false), x, [cls, reg], { ...args, classWeight, backend: 'cpu' } as never);
  await t.rejects(run({ reg: TABLE }), { code: 'BAD_CONFIG', message: /table for output reg, whose loss is a regr/ });
  await t.rejects(run({ cls: { 0: 1, 1: 2 } }), { code: 'BAD_CONFIG', message: /output cls .* class 2 is in them/ });
  await t.rejects(run([TABLE]), { code: 'BAD_CONFIG', message: /array of 1 table\(s\), and the model has 2 outputs/ });
  await t.rejects(run({ clss: TABLE }), { code: 'BAD_CONFIG', message: /names clss, not an output/ });
  tf.dispose([x, cls, reg]);
});
