// evaluate of a model of several outputs on 1 and 2 devices: a classifier head (softmax, categoricalCrossentropy)
// and a regression head (meanSquaredError) on one trunk, `metrics: ['acc']`, 40 samples in batches of 12 (the last
// smaller), y as Tensor[] and as { outputName: Tensor }. tfjs 4.22's model.evaluate returns one value more than
// metricsNames, a spurious one first: tandem's values (metricsNames order) against its values after the first, and
// the total loss also against an independent sum: each output's loss function on model.predict, summed. Then a
// model of two inputs (x as a map, then an array) and two outputs, and one of two inputs and one output, on 2 devices
// against model.evaluate (after its spurious first value where there are several outputs).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { evaluate } from '../src/index.js';
import { values } from './fixtures/fit-case-helpers.js';

await tf.setBackend('cpu');
const N = 40;

function make(): tf.LayersModel {
  const input = tf.input({ shape: [5] });
  const h = tf.layers.dense({ units: 6, activation: 'relu' }).apply(input) as tf.SymbolicTensor;
  const cls = tf.layers.dense({ units: 3, activation: 'softmax', name: 'cls' }).apply(h) as tf.SymbolicTensor;
  const reg = tf.layers.dense({ units: 2, name: 'reg' }).apply(h) as tf.SymbolicTensor;
  const m = tf.model({ inputs: input, outputs: [cls, reg] });
  m.compile({ optimizer: 'sgd', loss: ['categoricalCrossentropy', 'meanSquaredError'], metrics: ['acc'] });
  m.setWeights(m.getWeights().map((w, i) => tf.tensor(values(w.size, i + 1), w.shape)));
  return m;
}

const relative = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-6);

t.test('evaluate of two outputs = model.evaluate (after its spurious first value), on 1 and 2 devices', async t => {
  const model = make();
  const x = tf.tensor2d(values(N * 5, 7), [N, 5]);
  const labels = Array.from({ length: N }, (_, i) => Math.abs(Math.floor(values(6, i)[0] * 3)) % 3);
  const cls = tf.oneHot(tf.tensor1d(labels, 'int32'), 3).toFloat();
  const reg = tf.tensor2d(values(N * 2, 9), [N, 2]);
  const ref = model.evaluate(x, [cls, reg], { batchSize: 12 }) as tf.Scalar[];
  const want = ref.map(s => s.dataSync()[0]);
  t.equal(want.length, model.metricsNames.length + 1, 'tfjs 4.22: one value more than metricsNames');
  const right = want.slice(1); // metricsNames order
  const [pc, pr] = model.predict(x) as tf.Tensor[];
  const sum =
    tf.metrics.categoricalCrossentropy(cls, pc).mean().dataSync()[0] +
    tf.metrics.meanSquaredError(reg, pr).mean().dataSync()[0];
  t.ok(relative(right[0], sum) < 1e-5, `model.evaluate's total = the independent sum (${right[0]} vs ${sum})`);
  for (const devices of [1, 2]) {
    const y = devices === 1 ? [cls, reg] : { cls, reg };
    const got = (await evaluate(model, x, y, { batchSize: 12, devices, backend: 'cpu' })) as tf.Scalar[];
    const v = got.map(s => s.dataSync()[0]);
    t.equal(v.length, model.metricsNames.length, `${devices}: one value per metricsName (${model.metricsNames})`);
    const worst = Math.max(...v.map((g, i) => relative(g, right[i])));
    t.ok(worst < 1e-5, `${devices} device(s): = model.evaluate (worst ${worst.toExponential(2)}) ${v.join(', ')}`);
    t.ok(relative(v[0], sum) < 1e-5, `${devices} device(s): total = the sum of the outputs' losses`);
    t.ok(relative(v[0], v[1] + v[2]) < 1e-5, `${devices} device(s): total = cls_loss + reg_loss`);
    tf.dispose(got);
  }
  await t.rejects(evaluate(model, x, [cls], { backend: 'cpu' }), {
    name: 'TandemError',
    message: /evaluate: the model has 2 outputs/,
  });
  tf.dispose([...ref, x, cls, reg, pc, pr]);
  model.dispose();
});

/** Inputs a [4] and b [3] concatenated into one trunk; the cls head, and the reg head when `two`. */
function makeTwoInputs(two: boolean): tf.LayersModel {
  const a = tf.input({ shape: [4], name: 'a' });
  const b = tf.input({ shape: [3], name: 'b' });
  const h = tf.layers.dense({ units: 6, activation: 'relu' }).apply(tf.layers.concatenate().apply([a, b]));
  const cls = tf.layers.dense({ units: 3, activation: 'softmax', name: 'cls' }).apply(h) as tf.SymbolicTensor;
  const reg = tf.layers.dense({ units: 2, name: 'reg' }).apply(h) as tf.SymbolicTensor;
  const m = tf.model({ inputs: [a, b], outputs: two ? [cls, reg] : cls });
  const loss = two ? ['categoricalCrossentropy', 'meanSquaredError'] : 'categoricalCrossentropy';
  m.compile({ optimizer: 'sgd', loss, metrics: ['acc'] });
  m.setWeights(m.getWeights().map((w, i) => tf.tensor(values(w.size, i + 1), w.shape)));
  return m;
}

t.test('evaluate of two inputs (and two outputs or one) = model.evaluate, 2 devices', async t => {
  const a = tf.tensor2d(values(N * 4, 7), [N, 4]);
  const b = tf.tensor2d(values(N * 3, 8), [N, 3]);
  const labels = Array.from({ length: N }, (_, i) => Math.abs(Math.floor(values(6, i)[0] * 3)) % 3);
  const cls = tf.oneHot(tf.tensor1d(labels, 'int32'), 3).toFloat();
  const reg = tf.tensor2d(values(N * 2, 9), [N, 2]);
  for (const two of [true, false]) {
    const model = makeTwoInputs(two);
    const ref = model.evaluate([a, b], two ? [cls, reg] : cls, { batchSize: 12 }) as tf.Scalar | tf.Scalar[];
    const want = (Array.isArray(ref) ? ref : [ref]).map(s => s.dataSync()[0]).slice(two ? 1 : 0);
    for (const x of [{ a, b }, [a, b]]) {
      const got = await evaluate(model, x, two ? { cls, reg } : cls, { batchSize: 12, devices: 2, backend: 'cpu' });
      const v = (Array.isArray(got) ? got : [got]).map(s => s.dataSync()[0]);
      t.equal(v.length, model.metricsNames.length, `${model.metricsNames}: one value each`);
      const worst = Math.max(...v.map((g, i) => relative(g, want[i])));
      t.ok(worst < 1e-5, `${two ? 'two' : 'one'} output(s): = model.evaluate (worst ${worst.toExponential(2)})`);
      tf.dispose(got);
    }
    tf.dispose(ref);
    model.dispose();
  }
  tf.dispose([a, b, cls, reg]);
});
