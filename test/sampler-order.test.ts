// The global-batch sampler's order: shuffle false visits the samples in their order every epoch (batch k of any epoch
// is samples [k·B, (k+1)·B), each device its contiguous part), as model.fit with shuffle: false; the default is a
// seeded permutation per epoch, the same for the same seed and different between epochs.
import t from 'tap';
import { GlobalBatchSampler } from '../src/data/sampler.js';

t.test('shuffle false: the samples in order, every epoch, each device its contiguous part', async t => {
  const sampler = new GlobalBatchSampler(10, 4, 7, 2, false);
  t.equal(sampler.stepsPerEpoch, 2, 'two full batches of 4 in 10 samples (the last 2 are not trained)');
  t.same([...sampler.batchIndices(1)], [0, 1, 2, 3], 'epoch 1, batch 1');
  t.same([...sampler.batchIndices(2)], [4, 5, 6, 7], 'epoch 1, batch 2');
  t.same([...sampler.batchIndices(3)], [0, 1, 2, 3], 'epoch 2 starts again at sample 0');
  t.same([...sampler.shardIndices(4, 1)], [6, 7], "device 1's half of epoch 2's second batch");
});

t.test('shuffle (the default): a seeded permutation per epoch', async t => {
  const epoch = (s: GlobalBatchSampler, e: number) => [...s.batchIndices(e * 2 + 1), ...s.batchIndices(e * 2 + 2)];
  const a = new GlobalBatchSampler(16, 8, 7),
    b = new GlobalBatchSampler(16, 8, 7);
  t.same(epoch(a, 0), epoch(b, 0), 'the same seed: the same order');
  t.same(
    [...epoch(a, 0)].sort((x, y) => x - y),
    [...Array(16).keys()],
    'an epoch visits every sample once',
  );
  t.not(epoch(a, 0).join(), [...Array(16).keys()].join(), 'not in order');
  t.not(epoch(a, 1).join(), epoch(a, 0).join(), 'another order the next epoch');
});

t.test(
  'partialBatch: the last, smaller batch of each epoch, split as evenly as it can be (a device may get none)',
  async t => {
    const sampler = new GlobalBatchSampler(10, 4, 7, 2, false, true);
    t.equal(sampler.stepsPerEpoch, 3, 'two full batches of 4, then the last 2 samples');
    t.same([...sampler.batchIndices(3)], [8, 9], 'epoch 1, batch 3: the 2 samples left');
    t.same([...sampler.batchIndices(4)], [0, 1, 2, 3], 'epoch 2 starts again at sample 0');
    t.same([...sampler.shardIndices(3, 0)], [8], 'device 0: one of them');
    t.same([...sampler.shardIndices(3, 1)], [9], 'device 1: the other');
    const three = new GlobalBatchSampler(13, 6, 7, 3, false, true); // 2 batches of 6, then 1 sample
    t.same(
      [0, 1, 2].map(d => [...three.shardIndices(3, d)]),
      [[], [], [12]],
      'a last batch of 1 on 3 devices: two devices get none',
    );
    t.same(
      [0, 1, 2].map(d => [...three.shardIndices(2, d)]),
      [
        [6, 7],
        [8, 9],
        [10, 11],
      ],
      'full batches as before',
    );
  },
);
