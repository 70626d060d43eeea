// --strategy auto with the classifier methods: the profiler times the feature
// extractor, whose outputs are the embedding (its loss used to be taken over the
// data's classes: 'softmaxCrossEntropy: Shapes 4,4 and 4,8 must match').
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
  embedding: 8,
  strategy: 'auto',
};

for (const method of ['local-head', 'partial-fc'] as const) {
  t.test(`${method} --strategy auto: profiled, a strategy chosen, trained`, async t => {
    const summary = await train({ ...base, method });
    t.equal(summary.steps, 2);
    t.ok(summary.auto, 'the auto choice is reported');
    t.equal(summary.classifier?.method, method);
  });
}
