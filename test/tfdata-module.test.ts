// --data MODULE whose factory returns a tf.data.Dataset of batches: streamed through the ring (the main thread reads
// it, the loader threads read the ring), a run equals the same run on the same samples as an indexed dataset, bit
// for bit. Resume mid-epoch on a pipeline that reshuffles every pass (dataset.shuffle) equals the uninterrupted run:
// the stream skips ahead to the checkpoint's step. A shuffled sampler over a stream is refused naming --no-shuffle.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { train, type TrainConfig, type TrainSummary } from '../src/index.js';
import { osThreads } from './fixtures/os-threads.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-tfdata-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
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

/** A data module in the temp dir whose factory returns `body` (tf in scope: this test's copy of tfjs). */
function tfModule(name: string, body: string): string {
  const file = path.join(dir, name);
  writeFileSync(
    file,
    `import * as tf from '${import.meta.resolve('@tensorflow/tfjs')}';\nexport default () => ${body};\n`,
  );
  return file;
}

t.test('refused before any thread, naming the fix: labels -1, repeat(), a short batch mid-pass', async t => {
  const threads = osThreads();
  // labels -1, 0, 1: it was "has 1 class … for a regression", without a word of the -1
  const negative = tfModule(
    'negative.mjs',
    'tf.data.generator(function* () { for (let b = 0; b < 3; b++) ' +
      'yield { xs: tf.ones([4, 3]), ys: tf.tensor1d([-1, 0, 1, 0]) }; })',
  );
  await t.rejects(train({ ...base, batch: 4, data: negative }), {
    code: 'BAD_CONFIG',
    message: /tf\.data dataset whose classes are its labels 0 … the largest .* batch 0 has label -1: .*map the labels/,
  });
  // a pass that never ends: the counting pass hung
  const endless = tfModule('endless.mjs', 'tf.data.array([{ xs: tf.ones([4, 3]), ys: tf.ones([4]) }]).repeat()');
  await t.rejects(train({ ...base, batch: 4, data: endless }), {
    code: 'BAD_DATA',
    message: /the dataset never ends .*return a dataset that ends \(no repeat\(\): each epoch is a new pass\)/,
  });
  // batches of 4, 2, 4: the loaders waited for a batch the ring never held
  const short = tfModule(
    'short.mjs',
    'tf.data.array([0, 1, 2, 3, 4, 5]).batch(4).concatenate(tf.data.array([6, 7, 8, 9]).batch(4))' +
      '.map(v => ({ xs: tf.stack([v, v, v], 1), ys: v.mod(2) }))',
  );
  await t.rejects(train({ ...base, batch: 4, data: short }), {
    code: 'BAD_DATA',
    message: /batch 1 of the dataset's 3 has 2 samples and batch 0 4; only a pass's last batch may be smaller/,
  });
  t.equal(osThreads(), threads, 'all refused before any thread');
});
