// tandem's earlyStopping: tf.callbacks.earlyStopping's decisions (the same stopping epoch), plus restoreBestWeights,
// which tfjs refuses: a fit that stops early ends with its best epoch's weights in the model — on tandem's fit (2
// devices) and on tfjs's own model.fit — and a fit that runs all its epochs, or stops through another callback,
// keeps its last weights.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { earlyStopping, fit } from '../src/index.js';
import { FIT_CASES, twin } from './fixtures/fit-models.js';

await tf.setBackend('cpu');
const dense = FIT_CASES[0];
const base = { batchSize: 12, shuffle: false, verbose: 0 as const, epochs: 6 };

/** Sets logs.score to SCORES[epoch] before the callbacks after it see the logs: a monitored value of known shape. */
const SCORES = [3, 1, 2, 2.5, 0.5, 4];
// (tf.CustomCallback instances: tfjs's model.fit wraps every callback of a list whose first is a plain object)
const score = () => new tf.CustomCallback({ onEpochEnd: async (epoch, logs) => void (logs!.score = SCORES[epoch]) });

const weightsOf = (m: tf.LayersModel) => m.getWeights().map(w => w.dataSync() as Float32Array);

/** Each epoch's weights as onEpochEnd sees them, and the epochs seen. */
function recorder(model: () => tf.LayersModel) {
  const weights: Float32Array[][] = [];
  const cb = new tf.CustomCallback({
    onEpochEnd: async () => void weights.push(weightsOf(model())),
  });
  return { weights, cb };
}

function worst(a: Float32Array[], b: Float32Array[]): number {
  return a.reduce((m, w, k) => w.reduce((mm, v, i) => Math.max(mm, Math.abs(v - b[k][i])), m), 0);
}

t.test('stops where tf.callbacks.earlyStopping stops; restoreBestWeights puts the best epoch back', async t => {
  const { x, y } = dense.data();
  const reference = dense.make();
  const args = { monitor: 'score', mode: 'min' as const, patience: 2 };
  const refModel = twin(reference, dense.make);
  const history = await refModel.fit(x, y, { ...base, callbacks: [score(), tf.callbacks.earlyStopping(args)] });
  const model = twin(reference, dense.make);
  const got = recorder(() => model);
  const ours = earlyStopping({ ...args, restoreBestWeights: true });
  const h = await fit(model, x, y, { ...base, callbacks: [score(), got.cb, ours], devices: 2, backend: 'cpu' });
  t.same(h.epoch, history.epoch, `the same epochs as tfjs's earlyStopping (${history.epoch.join(', ')})`);
  t.equal(h.epoch.length, 4, 'best at epoch 1 (score 1), no better in 2 and 3: stopped after epoch 3');
  t.equal(ours.bestEpoch, -1, 'the copy is dropped at the end');
  t.equal(worst(weightsOf(model), got.weights[1]), 0, "the model holds epoch 1's weights, bit for bit");
  t.ok(worst(weightsOf(model), got.weights[3]) > 1e-4, "not the last epoch's");
});

t.test("without restoreBestWeights, or stopped by another callback, the last epoch's weights stay", async t => {
  const { x, y } = dense.data();
  const reference = dense.make();
  const plain = twin(reference, dense.make);
  const seen = recorder(() => plain);
  const args = { monitor: 'score', mode: 'min' as const, patience: 2 };
  await fit(plain, x, y, { ...base, callbacks: [score(), seen.cb, earlyStopping(args)], backend: 'cpu' });
  t.equal(worst(weightsOf(plain), seen.weights.at(-1)!), 0, 'restoreBestWeights off: the last weights');
  const other = twin(reference, dense.make);
  const seen2 = recorder(() => other);
  const stopAt2: tf.CustomCallbackArgs = { onEpochEnd: async e => void (e === 2 && (other.stopTraining = true)) };
  const patient = earlyStopping({ ...args, patience: 10, restoreBestWeights: true });
  const h = await fit(other, x, y, { ...base, callbacks: [score(), seen2.cb, patient, stopAt2], backend: 'cpu' });
  t.equal(h.epoch.length, 3, 'another callback stopped it after epoch 2');
  t.equal(worst(weightsOf(other), seen2.weights[2]), 0, "not this callback's stop: the last weights stay");
});

t.test("restoreBestWeights on tfjs's own model.fit too; bad arguments refused", async t => {
  const { x, y } = dense.data();
  const model = dense.make();
  const seen = recorder(() => model);
  const ours = earlyStopping({ monitor: 'score', mode: 'min', patience: 2, restoreBestWeights: true });
  const h = await model.fit(x, y, { ...base, callbacks: [score(), seen.cb, ours] });
  t.equal(h.epoch.length, 4);
  t.equal(worst(weightsOf(model), seen.weights[1]), 0, "model.fit ends with epoch 1's weights");
  t.throws(() => earlyStopping({ restoreBestWeights: 'yes' as unknown as boolean }), {
    name: 'TandemError',
    message: /restoreBestWeights must be true or false/,
  });
  t.throws(() => tf.callbacks.earlyStopping({ restoreBestWeights: true }), /not implemented/, 'tfjs refuses it');
});
