// bestCheckpoints: the models of the K best epochs by a monitored log stay in the directory, and no other. With a
// monitored value of known shape (a callback sets logs.score per epoch) on tandem's fit (2 devices): the folders kept
// are the K epochs of lowest score (mode min) or highest (mode max), and each holds that epoch's weights, bit for bit
// (recorded by a callback at each epoch's end). With val_loss: the epochs kept are the K lowest of the History's
// val_loss. Bad arguments, and a monitor the logs lack, are refused.
import t from 'tap';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { bestCheckpoints, fit } from '../src/index.js';
import { fileModelHandler } from '../src/model/file-model-handler.js';
import { FIT_CASES, twin } from './fixtures/fit-models.js';

await tf.setBackend('cpu');
const dense = FIT_CASES[0];
const base = { batchSize: 12, shuffle: false, verbose: 0 as const, epochs: 6, devices: 2, backend: 'cpu' as const };
const SCORES = [3, 1, 2, 2.5, 0.5, 4];
const score = () => new tf.CustomCallback({ onEpochEnd: async (epoch, logs) => void (logs!.score = SCORES[epoch]) });

const dir = mkdtempSync(path.join(tmpdir(), 'tandem-best-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** Each epoch's weights as onEpochEnd sees them. */
function recorder(model: tf.LayersModel) {
  const weights: Float32Array[][] = [];
  const cb = new tf.CustomCallback({
    onEpochEnd: async () => void weights.push(model.getWeights().map(w => w.dataSync() as Float32Array)),
  });
  return { weights, cb };
}

const kept = (d: string) => readdirSync(d).sort();

async function savedWeights(folder: string): Promise<Float32Array[]> {
  const model = await tf.loadLayersModel(fileModelHandler(path.join(folder, 'model.json')));
  const weights = model.getWeights().map(w => w.dataSync() as Float32Array);
  model.dispose();
  return weights;
}

for (const [mode, keep, want] of [
  ['min', 2, [4, 1]],
  ['max', 1, [5]],
] as const) {
  t.test(`mode ${mode}, keep ${keep}: the epochs of the best scores, with their weights`, async t => {
    const { x, y } = dense.data();
    const model = twin(dense.make(), dense.make);
    const seen = recorder(model);
    const out = path.join(dir, mode);
    const best = bestCheckpoints({ dir: out, keep, monitor: 'score', mode });
    await fit(model, x, y, { ...base, callbacks: [score(), seen.cb, best] });
    t.same(
      best.best().map(k => k.epoch),
      want,
      `epochs ${want.join(', ')}, best first`,
    );
    t.same(kept(out), want.map(e => `epoch-${e}`).sort(), 'only their folders are left');
    for (const e of want)
      t.same(await savedWeights(path.join(out, `epoch-${e}`)), seen.weights[e], `epoch ${e}'s weights, bit for bit`);
  });
}

t.test('monitoring val_loss: the epochs of the lowest val_loss in the History', async t => {
  const { x, y } = dense.data();
  const model = twin(dense.make(), dense.make);
  const out = path.join(dir, 'val');
  const best = bestCheckpoints({ dir: out, keep: 2 });
  const h = await fit(model, x, y, { ...base, validationSplit: 0.25, callbacks: [best] });
  const losses = h.history.val_loss as number[];
  const lowest = losses
    .map((v, e) => [v, e])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .slice(0, 2)
    .map(([, e]) => e);
  t.same(
    best.best().map(k => k.epoch),
    lowest,
    `epochs ${lowest.join(', ')}`,
  );
  t.same(kept(out), lowest.map(e => `epoch-${e}`).sort());
});

t.test('refusals', async t => {
  t.throws(() => bestCheckpoints({ dir: '' }), { name: 'TandemError', message: /give \{ dir/ });
  t.throws(() => bestCheckpoints({ dir, keep: 0 }), { message: /keep must be an integer ≥ 1, got 0/ });
  t.throws(() => bestCheckpoints({ dir, mode: 'up' as 'min' }), { message: /mode must be 'min' or 'max'/ });
  const { x, y } = dense.data();
  const model = dense.make();
  await t.rejects(fit(model, x, y, { ...base, epochs: 1, callbacks: [bestCheckpoints({ dir })] }), {
    message: /no 'val_loss' \(they have loss, acc\)/,
  });
});
