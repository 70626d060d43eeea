// A user's model factory that does not pass the `seed` it is given to its
// initialisers (tfjs's default: they seed themselves from Math.random) still
// builds the same weights for the same --seed: a run repeats bit for bit, and
// 2 devices equal 1 on the same global batch; another seed gives other weights.
import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, type TrainConfig } from '../src/index.js';
import { worstDifference } from './fixtures/weights-difference.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-seeded-factory-'));
const model = path.join(dir, 'unseeded.mjs');
writeFileSync(
  model,
  `export default (tf, { inputShape, classes }) => tf.sequential({ layers: [
  tf.layers.flatten({ inputShape }),
  tf.layers.dense({ units: 12, activation: 'relu' }),
  tf.layers.dense({ units: classes }) ] });`,
);
const cfg: TrainConfig = {
  model,
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  classes: 4,
  datasetSize: 64,
  batch: 8,
  steps: 2,
  backend: 'cpu',
  seed: 3,
  lr: 0.05,
};

t.test('an unseeded factory: the same seed repeats the run, on 1 device and on 2; another seed does not', async t => {
  const once = await train({ ...cfg, devices: 1 });
  const again = await train({ ...cfg, devices: 1 });
  t.equal(worstDifference(once.weights, again.weights), 0, 'the same seed on 1 device twice: the same bits');
  const two = await train({ ...cfg, devices: 2 });
  const worst = worstDifference(two.weights, once.weights);
  t.ok(
    worst < 1e-5,
    `2 devices = 1 device on the same global batch: max |difference| ${worst.toExponential(2)} < 1e-5`,
  );
  const other = await train({ ...cfg, devices: 1, seed: 4 });
  t.ok(worstDifference(other.weights, once.weights) > 1e-3, 'another seed: other weights');
});
