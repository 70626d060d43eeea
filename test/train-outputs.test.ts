// What a run leaves: a model tf.loadLayersModel reads back with the trained
// values, summary.json, and a flat tensor count on every device.
import t from 'tap';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { train, fileModelHandler } from '../src/index.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';

// The default backend: TANDEM_BACKEND when set (CI's wasm pass), else native when the addon is built, else wasm.
const DEFAULT_BACKEND = process.env.TANDEM_BACKEND ?? (loadNativeAddon().loaded ? 'native' : 'wasm');

t.test('--out writes a loadable model and summary; tensors stay flat; the default backend trains', async t => {
  const out = mkdtempSync(path.join(os.tmpdir(), 'tandem-out-'));
  const counts: number[][] = [];
  const summary = await train(
    {
      model: 'alexnet-mini',
      data: 'synthetic-images',
      imageSize: [16, 16, 3],
      datasetSize: 256,
      batch: 16,
      steps: 12,
      devices: 2,
      out,
    },
    { onStep: m => counts.push(m.numTensors) },
  );
  t.equal(summary.config.backend, DEFAULT_BACKEND, `default backend ${DEFAULT_BACKEND}`);
  t.ok(
    summary.finalLoss < summary.history[0].loss,
    `loss falls: ${summary.history[0].loss.toFixed(3)} -> ${summary.finalLoss.toFixed(3)}`,
  );
  const steady = counts.slice(1);
  t.ok(
    steady.every(c => c.every(n => n === steady[0][0])),
    `tensor count per device flat across steps: ${counts.map(c => c.join('/')).join(' ')}`,
  );
  const saved = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8')) as {
    steps: number;
    samplesPerSecond: number;
  };
  t.equal(saved.steps, 12);
  t.ok(saved.samplesPerSecond > 0);
  await tf.setBackend('cpu');
  const model = await tf.loadLayersModel(fileModelHandler(path.join(out, 'model.json')));
  const loaded = model.trainableWeights.map(w => w.read().dataSync());
  t.equal(loaded.length, summary.weights.length);
  summary.weights.forEach((w, i) =>
    t.same(Array.from(loaded[i]), Array.from(w.values), `weight ${w.name} round-trips`),
  );
  model.dispose();
});
