// fit's partial last batch: an epoch whose samples are not a multiple of batchSize ends with a smaller batch, which
// tfjs's model.fit trains; tandem's fit trains it too, split over the devices unevenly (a device may get none of it),
// each device's gradient weighted by its share, so the step is one engine's step on that batch. Compared with
// model.fit on one engine (cpu, shuffle: false): History relative 1e-4, final weights 1e-4, on 1, 2 and 3 devices.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { fit, fitDataset } from '../src/index.js';
import { FIT_CASES, assertSameTraining, twin } from './fixtures/fit-models.js';

const REL = 1e-4;
const WEIGHTS = 1e-4;

await tf.setBackend('cpu');

interface Shape {
  name: string;
  caseIndex: number;
  /** Samples of x and y used (≤ 48). */
  samples: number;
  batchSize: number;
  validationSplit?: number;
  devices: number[];
}

// 47 samples in batches of 12: 3 full, then 11 (on 2 devices 5 and 6, on 3 devices 3, 4 and 4).
// 48 with validationSplit 0.2: 38 train, 3 batches of 12, then 2 (on 3 devices 0, 1 and 1: one device has none).
// 37 in batches of 12: the last batch is 1 sample (on 2 devices 0 and 1).
// 21 with validationSplit 0.2 in batches of 64: one batch of 16 an epoch (BatchNormalization: 8 + 8).
const SHAPES: Shape[] = [
  { name: '47 samples, batch 12', caseIndex: 0, samples: 47, batchSize: 12, devices: [1, 2, 3] },
  {
    name: '38 train + validation, batch 12',
    caseIndex: 0,
    samples: 48,
    batchSize: 12,
    validationSplit: 0.2,
    devices: [3],
  },
  { name: '37 samples, batch 12 (last batch of one)', caseIndex: 1, samples: 37, batchSize: 12, devices: [2] },
  { name: '47 samples, batch 12', caseIndex: 3, samples: 47, batchSize: 12, devices: [2] },
  // BatchNormalization (sync: the global batch's statistics): 11 rows as 5 + 6 and 3 + 4 + 4.
  { name: '47 samples, batch 12', caseIndex: 2, samples: 47, batchSize: 12, devices: [2, 3] },
  // Target tensors and metrics (acc, precision, recall as sums): a last batch of 2 on 3 devices, one with none.
  { name: '38 samples, batch 12 (multi-label)', caseIndex: 10, samples: 38, batchSize: 12, devices: [3] },
  // A batch larger than the samples (model.fit trains one batch of them all an epoch): 16 train + 5 validation.
  {
    name: '21 samples, batch 64',
    caseIndex: 2,
    samples: 21,
    batchSize: 64,
    validationSplit: 0.2,
    devices: [1, 2],
  },
];

for (const shape of SHAPES) {
  const c = FIT_CASES[shape.caseIndex];
  t.test(`${c.name}, ${shape.name}: fit on ${shape.devices.join(', ')} device(s) equals model.fit`, async t => {
    const data = c.data();
    const x = data.x.slice(0, shape.samples),
      y = data.y.slice(0, shape.samples);
    tf.dispose([data.x, data.y]);
    const reference = c.make();
    const start = twin(reference, c.make);
    const args = {
      epochs: 2,
      batchSize: shape.batchSize,
      shuffle: false,
      verbose: 0 as const,
      ...(shape.validationSplit ? { validationSplit: shape.validationSplit } : {}),
    };
    const batches: number[] = [];
    const sizes = { onBatchEnd: async (_b: number, logs?: tf.Logs) => void batches.push(logs?.size as number) };
    const expected = await reference.fit(x, y, { ...args, callbacks: sizes });
    const expectedSizes = batches.splice(0);
    t.ok(expectedSizes.at(-1)! < shape.batchSize, `model.fit trains a last batch of ${expectedSizes.at(-1)}`);
    for (const devices of shape.devices) {
      const model = twin(start, c.make);
      const got = await fit(model, x, y, { ...args, devices, backend: 'cpu', callbacks: sizes });
      t.same(batches.splice(0), expectedSizes, `${devices} device(s): the batches and their sizes, as model.fit's`);
      t.same(Object.keys(got.history).sort(), Object.keys(expected.history).sort(), `${devices}: History keys`);
      const what = `${devices} device(s): `;
      assertSameTraining(t, [expected, reference], [got, model], { rel: REL, weights: WEIGHTS, what });
      model.dispose();
    }
    tf.dispose([x, y]);
    reference.dispose();
    start.dispose();
  });
}

t.test(
  'fitDataset: a dataset whose last batch is smaller (41 rows in batches of 12) equals model.fitDataset',
  async t => {
    const c = FIT_CASES[0];
    const { x, y } = c.data();
    const rows = (v: tf.Tensor) => tf.data.array(v.slice(0, 41).unstack());
    const dataset = () =>
      tf.data.zip({ xs: rows(x), ys: rows(y) }).batch(12) as unknown as tf.data.Dataset<{
        xs: tf.Tensor;
        ys: tf.Tensor;
      }>;
    const reference = c.make();
    const model = twin(reference, c.make);
    const sizes: number[] = [];
    const callbacks = { onBatchEnd: async (_b: number, logs?: tf.Logs) => void sizes.push(logs?.size as number) };
    const expected = await reference.fitDataset(dataset(), { epochs: 2, verbose: 0, callbacks });
    const expectedSizes = sizes.splice(0);
    const got = await fitDataset(model, dataset(), { epochs: 2, verbose: 0, callbacks, devices: 3, backend: 'cpu' });
    t.same(sizes, expectedSizes, `the batches' sizes, as model.fitDataset's (${expectedSizes.join(', ')})`);
    assertSameTraining(t, [expected, reference], [got, model], { rel: REL, weights: WEIGHTS });
    tf.dispose([x, y]);
    reference.dispose();
    model.dispose();
  },
);
