// Resources over a run: tensors and memory stay flat (a short soak), and two
// trainings in one process do not interfere with each other.
import t from 'tap';
import { soak } from '../bench/soak.js';
import { train, type TrainConfig } from '../src/index.js';

t.test('200-step soak: tfjs tensor count flat on every device, RSS bounded, no error', async t => {
  const { points, error } = await soak(200);
  t.equal(error, undefined);
  t.equal(points.length, 3);
  const [, middle, end] = points;
  t.same(
    end.tensors,
    middle.tensors,
    `tensors per device at step ${middle.step} and ${end.step}: ${middle.tensors} / ${end.tensors}`,
  );
  t.ok(
    end.rssMiB - middle.rssMiB < 64,
    `RSS from step ${middle.step} to ${end.step}: ${middle.rssMiB.toFixed(0)} -> ${end.rssMiB.toFixed(0)} MiB`,
  );
});

t.test('two trainings at once in one process give what each gives alone', async t => {
  const a: TrainConfig = {
    model: 'mlp',
    data: 'synthetic-images',
    imageSize: [8, 8, 1],
    datasetSize: 256,
    batch: 16,
    steps: 3,
    devices: 2,
    backend: 'cpu',
    seed: 1,
  };
  const b: TrainConfig = { ...a, seed: 2, devices: 3, batch: 24, strategy: 'per-layer', optimizer: 'adam', lr: 0.01 };
  const [alone1, alone2] = [await train(a), await train(b)];
  const [both1, both2] = await Promise.all([train(a), train(b)]);
  const same = (x: typeof alone1, y: typeof alone1) =>
    x.weights.every((w, i) => w.values.every((v, j) => v === y.weights[i].values[j]));
  t.ok(same(alone1, both1), 'first run unaffected');
  t.ok(same(alone2, both2), 'second run unaffected');
  t.notOk(same(alone1, alone2 as typeof alone1), 'the comparison can tell different runs apart');
});
