// An image folder (PNG and JPEG of odd sizes, 3 classes) trained by `tandem launch --hosts 2 --devices 1` on loopback
// gives the parameters fit gives for the same images as tensors on 2 devices: each host reads its devices' shard of
// every global batch from the folder (and its cache), as one process with 2 devices does.
import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { fit } from '../src/index.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { killAllTandems, tandem } from './fixtures/tandem-lines.js';
import {
  CLASSES,
  decodeAsDocumented,
  documentedOrder,
  writeImageFolder,
  writeImageModel,
} from './fixtures/image-folder.js';

t.teardown(killAllTandems);
const root = mkdtempSync(path.join(os.tmpdir(), 'tandem-image-hosts-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
const dir = path.join(root, 'images');
writeImageFolder(dir, 8); // 24 images
const H = 7,
  W = 5;
const modelFile = path.join(root, 'model.mjs');
writeImageModel(modelFile);

/** The folder's images as the docs say tandem reads them, and their labels. */
async function imagesAsTensors(): Promise<{ x: tf.Tensor; y: tf.Tensor }> {
  const files = CLASSES.flatMap((name, label) =>
    readdirSync(path.join(dir, name))
      .filter(f => /\.(png|jpe?g)$/.test(f))
      .map(f => ({ rel: `${name}/${f}`, label })),
  );
  const ordered = documentedOrder(files);
  const pixels = await Promise.all(ordered.map(f => decodeAsDocumented(path.join(dir, f.rel), H, W)));
  const flat = new Float32Array(pixels.length * H * W * 3);
  pixels.forEach((p, i) => flat.set(p, i * H * W * 3));
  return { x: tf.tensor(flat, [pixels.length, H, W, 3]), y: tf.tensor1d(ordered.map(f => f.label)) };
}

if (glooAddonOrSkip()) {
  t.test('launch --hosts 2 on an image folder equals fit on the same images as tensors (2 devices)', async t => {
    const out = path.join(root, 'out');
    const launch = tandem([
      'launch',
      '--hosts',
      '2',
      '--devices',
      '1',
      '--model',
      modelFile,
      '--data',
      dir,
      '--image-size',
      `${H}x${W}`,
      '--backend',
      'cpu',
      '--batch',
      '6',
      '--epochs',
      '2',
      '--no-shuffle',
      '--optimizer',
      'sgd',
      '--momentum',
      '0',
      '--lr',
      '0.1',
      '--out',
      out,
    ]);
    const ended = await launch.ended;
    t.equal(ended.code, 0, `launch exits 0: ${launch.stderr.join('\n')}`);
    const bin = readFileSync(path.join(out, 'weights.bin'));
    const trained = new Float32Array(bin.buffer, bin.byteOffset, bin.byteLength / 4);
    const { x, y } = await imagesAsTensors();
    const { default: factory } = (await import(modelFile)) as {
      default: (tfm: typeof tf, o: { inputShape: number[]; classes: number }) => tf.LayersModel;
    };
    const model = factory(tf, { inputShape: [H, W, 3], classes: 3 });
    model.compile({ optimizer: tf.train.sgd(0.1), loss: 'sparseCategoricalCrossentropy' });
    await fit(model, x, y, { epochs: 2, batchSize: 6, shuffle: false, devices: 2, backend: 'cpu', verbose: 0 });
    const fitted = Float32Array.from(model.getWeights().flatMap(w => Array.from(w.dataSync())));
    t.equal(trained.length, fitted.length, 'as many parameters');
    let worst = 0;
    fitted.forEach((v, i) => (worst = Math.max(worst, Math.abs(v - trained[i]))));
    t.ok(worst < 1e-5, `the same parameters as fit on the decoded tensors (worst difference ${worst})`);
    tf.dispose([x, y]);
    model.dispose();
  });
}
