// evaluate(model, x, y, args) across device threads equals tfjs's model.evaluate on one engine: the loss and every
// metric (relative 1e-5), the same shape of result (one scalar, or one per name of model.metricsNames), with an
// uneven last batch and shards of whole batches.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { evaluate } from '../src/index.js';
import { FIT_CASES, worstRelative } from './fixtures/fit-models.js';

await tf.setBackend('cpu');

const values = async (out: tf.Scalar | tf.Scalar[]) =>
  Promise.all((Array.isArray(out) ? out : [out]).map(async s => (await s.data())[0]));

for (const c of [FIT_CASES[2], FIT_CASES[4]]) {
  t.test(`${c.name}: evaluate on 1, 2 and 3 devices equals model.evaluate`, async t => {
    const { x, y } = c.data();
    const model = c.make();
    // Trained a little, so BatchNormalization's moving statistics are not their initial values.
    await model.fit(x, y, { epochs: 1, batchSize: 12, verbose: 0 });
    const expectedOut = model.evaluate(x, y, { batchSize: 10 });
    const expected = await values(expectedOut);
    for (const devices of [1, 2, 3]) {
      const out = await evaluate(model, x, y, { batchSize: 10, devices, backend: 'cpu' });
      t.equal(Array.isArray(out), Array.isArray(expectedOut), `${devices} device(s): the result's shape`);
      const got = await values(out);
      const d = worstRelative(expected, got);
      t.ok(d <= 1e-5, `${devices} device(s): [${got.join(', ')}] relative difference ${d.toExponential(2)} ≤ 1e-5`);
      tf.dispose(out);
    }
    tf.dispose([x, y, expectedOut]);
    model.dispose();
  });
}

t.test('evaluate of no samples returns what model.evaluate returns: an empty list', async t => {
  const c = FIT_CASES[2];
  const { x, y } = c.data();
  const model = c.make();
  const [x0, y0] = [x.slice(0, 0), y.slice(0, 0)];
  const expected = model.evaluate(x0, y0, { batchSize: 10 });
  t.same(expected, [], 'model.evaluate: []');
  t.same(await evaluate(model, x0, y0, { batchSize: 10, backend: 'cpu' }), expected, 'evaluate: the same');
  tf.dispose([x, y, x0, y0]);
  model.dispose();
});
