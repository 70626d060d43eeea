// --data MODULE whose factory returns a tf.data.Dataset of batches: streamed through the ring (the main thread reads
// it, the loader threads read the ring), a run equals the same run on the same samples as an indexed dataset, bit
// for bit. Resume mid-epoch on a pipeline that reshuffles every pass (dataset.shuffle) equals the uninterrupted run:
// the stream skips ahead to the checkpoint's step. A shuffled sampler over a stream is refused naming --no-shuffle.
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { train, type TrainConfig, type TrainSummary } from '../src/index.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-tfdata-'));
const fixture = (name: string) => fileURLToPath(new URL(`../../test/fixtures/${name}`, import.meta.url));
const sameBits = (a: TrainSummary, b: TrainSummary) =>
  a.weights.every((w, k) => w.values.every((v, i) => Object.is(v, b.weights[k].values[i])));
// 44 samples in batches of 8: 5 full, then 4 (2 on each device): 6 steps an epoch
const base: TrainConfig = {
  model: 'mlp',
  devices: 2,
  backend: 'cpu',
  batch: 8,
  seed: 5,
  epochs: 3,
  shuffle: false,
  partialBatch: true,
};

t.test('a tf.data module trains as the same samples from an indexed module, bit for bit', async t => {
  const streamed = await train({ ...base, data: fixture('tfdata-batches.mjs') });
  const indexed = await train({ ...base, data: fixture('tfdata-indexed.mjs') });
  t.equal(streamed.steps, 18, '3 epochs of 6 steps (the last batch of 4)');
  t.ok(sameBits(streamed, indexed), 'the same weights, bit for bit');
  const { meanLoadWaitMs, loadWaitShare } = streamed.timings;
  t.ok(
    loadWaitShare >= 0 && loadWaitShare < 1 && Math.abs(loadWaitShare - meanLoadWaitMs / streamed.meanStepMs) < 1e-9,
    `the summary's data-wait share ${(100 * loadWaitShare).toFixed(1)}% = meanLoadWaitMs / meanStepMs`,
  );
});

t.test('resume mid-epoch on a pipeline reshuffled every pass equals the uninterrupted run', async t => {
  const run = { ...base, data: fixture('tfdata-shuffled.mjs') };
  const ckpt = path.join(dir, 'ckpt');
  const full = await train({ ...run, checkpointEvery: 8, checkpointDir: ckpt });
  const resumed = await train({ ...run, resume: ckpt });
  t.equal(resumed.firstStep, 17, 'resumed after the checkpoint of step 16, in epoch 3');
  t.ok(sameBits(resumed, full), '16 + 2 steps = 18 uninterrupted steps, bit for bit');
  // the pipeline's passes differ: a resume that read the first pass again would train other batches
  const { default: make } = (await import(fixture('tfdata-shuffled.mjs'))) as {
    default: (o: { seed: number }) => tf.data.Dataset<{ ys: tf.Tensor }>;
  };
  const pipeline = make({ seed: 5 });
  const firstLabels = async () => Array.from((await (await pipeline.iterator()).next()).value.ys.dataSync());
  t.notSame(await firstLabels(), await firstLabels(), "two passes' first batches differ");
});

t.test('a streamed dataset with a shuffled sampler is refused naming --no-shuffle', async t => {
  await t.rejects(train({ ...base, shuffle: true, data: fixture('tfdata-batches.mjs') }), {
    message: /not in the batch of step 1; .*--batch 8.*--no-shuffle/,
  });
});
