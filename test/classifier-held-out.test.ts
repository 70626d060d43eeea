// The held-out evaluation of the classifier methods: the nearest class-centre
// accuracy needs a probe (an odd-numbered held-out sample of a class that has a
// centre); with none it is absent (the CLI prints n/a), not 0%.
import t from 'tap';
import { train, type TrainConfig } from '../src/index.js';

const base: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  datasetSize: 200,
  classes: 4,
  batch: 8,
  steps: 2,
  devices: 2,
  backend: 'cpu',
  method: 'local-head',
  embedding: 8,
};

t.test('one held-out sample: no probe, no centre accuracy; 20: the probes counted', async t => {
  const one = await train({ ...base, heldOut: 1 });
  t.equal(one.classifier?.heldOut?.samples, 1);
  t.equal(one.classifier?.heldOut?.centreProbes, 0);
  t.equal(one.classifier?.heldOut?.centreAccuracy, undefined, 'no probe: absent (was 0, read as 0% accuracy)');
  t.type(one.classifier?.heldOut?.classifierAccuracy, 'number', 'the full classifier is still evaluated');
  const some = await train({ ...base, method: 'partial-fc', heldOut: 20 });
  t.ok((some.classifier?.heldOut?.centreProbes ?? 0) > 0, 'odd-numbered samples of classes with a centre are probes');
  t.type(some.classifier?.heldOut?.centreAccuracy, 'number');
});
