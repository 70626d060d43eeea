// --data DIR, an image folder (one subfolder per class, PNG and JPEG of odd sizes, resized): trains on 2 devices to
// the parameters fit gives for the same images as tensors; labels in folder order, written to labels.json; a corrupt
// file is refused naming its path; the cache is used by the second run (nothing decoded, the file untouched) and
// rebuilt when a file changes, decoding that file alone; concurrent builders leave one whole cache; resume mid-epoch
// is exact.
import t from 'tap';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  cpSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import sharp from 'sharp';
import { fit, train, type TrainConfig } from '../src/index.js';
import { prepareImageFolder, openImageFolder } from '../src/data/image-folder.js';
import { cacheFileOf } from '../src/data/image-cache.js';
import {
  CLASSES,
  decodeAsDocumented,
  documentedOrder,
  pngBytes,
  writeImageFolder,
  writeImageModel,
} from './fixtures/image-folder.js';
import { osThreads } from './fixtures/os-threads.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'tandem-image-folder-'));
const dir = path.join(root, 'images');
writeImageFolder(dir, 12); // 36 images
const H = 7,
  W = 5;
const modelFile = path.join(root, 'model.mjs');
writeImageModel(modelFile);
const base: TrainConfig = {
  model: modelFile,
  data: dir,
  imageSize: [H, W],
  devices: 2,
  backend: 'cpu',
  batch: 6,
  optimizer: 'sgd',
  momentum: 0,
  lr: 0.1,
};

/** A copy of the generated folder at `to`, without its cache. */
function copyFolder(to: string): void {
  cpSync(dir, to, { recursive: true, filter: from => !from.includes('.tandem-cache') });
}

/** The folder's images as the docs say tandem reads them: [N, H, W, 3] in [0, 1] and their labels. */
async function imagesAsTensors(folder: string): Promise<{ x: tf.Tensor; y: tf.Tensor }> {
  const files = CLASSES.flatMap((name, label) =>
    readdirSync(path.join(folder, name))
      .filter(f => /\.(png|jpe?g)$/.test(f))
      .map(f => ({ rel: `${name}/${f}`, label })),
  );
  const ordered = documentedOrder(files);
  const pixels = await Promise.all(ordered.map(f => decodeAsDocumented(path.join(folder, f.rel), H, W)));
  const flat = new Float32Array(pixels.length * H * W * 3);
  pixels.forEach((p, i) => flat.set(p, i * H * W * 3));
  return {
    x: tf.tensor(flat, [pixels.length, H, W, 3]),
    y: tf.tensor1d(
      ordered.map(f => f.label),
      'float32',
    ),
  };
}

t.test('trains on 2 devices to the parameters fit gives for the same images as tensors; labels.json', async t => {
  const out = path.join(root, 'out');
  const summary = await train({ ...base, epochs: 2, shuffle: false, out });
  t.same(JSON.parse(readFileSync(path.join(out, 'labels.json'), 'utf8')), CLASSES, 'labels in folder order');
  t.equal(summary.steps, 12, '36 images (the .txt files left out), batch 6, 2 epochs');
  const { x, y } = await imagesAsTensors(dir);
  const { default: factory } = (await import(modelFile)) as {
    default: (tfm: typeof tf, o: { inputShape: number[]; classes: number }) => tf.LayersModel;
  };
  const model = factory(tf, { inputShape: [H, W, 3], classes: 3 });
  model.compile({ optimizer: tf.train.sgd(0.1), loss: 'sparseCategoricalCrossentropy' });
  await fit(model, x, y, { epochs: 2, batchSize: 6, shuffle: false, devices: 2, backend: 'cpu' });
  const fitted = model.getWeights().map(w => w.dataSync());
  let worst = 0;
  summary.weights.forEach((w, k) => w.values.forEach((v, i) => (worst = Math.max(worst, Math.abs(v - fitted[k][i])))));
  t.ok(worst < 1e-5, `same parameters as fit on the decoded tensors (worst difference ${worst})`);
  tf.dispose([x, y]);
  model.dispose();
});

t.test('the cache: the second run decodes nothing; a changed file is decoded alone; builders race safely', async t => {
  const folder = path.join(root, 'cached');
  copyFolder(folder);
  const cacheDir = path.join(root, 'cache');
  const shape = [H, W, 3] as const;
  const first = await prepareImageFolder(folder, shape, cacheDir);
  t.equal(first.decoded, 36, 'the first build decodes every image');
  const before = statSync(first.cacheFile);
  const second = await prepareImageFolder(folder, shape, cacheDir);
  t.same([second.decoded, second.stamp], [0, first.stamp], 'the second decodes none');
  const ran = await train({ ...base, data: folder, dataCache: cacheDir, steps: 2 });
  t.equal(ran.steps, 2);
  const after = statSync(first.cacheFile);
  t.same([after.ino, after.mtimeMs], [before.ino, before.mtimeMs], 'a run on 2 devices left the cache as it was');
  // One file rewritten (another picture, another size): the cache is rebuilt, that file alone decoded.
  const changed = path.join(folder, 'bee', 'img-4.png');
  const rgba = Buffer.alloc(6 * 4 * 4, 255);
  writeFileSync(changed, pngBytes(rgba, 6, 4));
  const third = await prepareImageFolder(folder, shape, cacheDir);
  t.equal(third.decoded, 1, 'only the changed file is decoded');
  t.not(third.stamp, first.stamp);
  const ds = await openImageFolder({
    kind: 'image-folder',
    dir: folder,
    imageShape: [H, W, 3],
    cacheDir,
    stamp: third.stamp,
  });
  const expected = await decodeAsDocumented(changed, H, W);
  const order = documentedOrder(
    CLASSES.flatMap((name, label) =>
      readdirSync(path.join(folder, name))
        .filter(f => /\.(png|jpe?g)$/.test(f))
        .map(f => ({ rel: `${name}/${f}`, label })),
    ),
  );
  const index = order.findIndex(f => f.rel === 'bee/img-4.png');
  const got = new Float32Array(H * W * 3);
  t.equal(ds.read(index, got, 0), 1, 'its label: bee, the second folder');
  t.same([...got], [...expected], 'the dataset reads the new pixels');
  // Builders racing on an empty cache directory: each writes its own temporary file and renames it.
  const raceDir = path.join(root, 'race-cache');
  const raced = await Promise.all([1, 2, 3].map(() => prepareImageFolder(folder, shape, raceDir)));
  t.same(new Set(raced.map(r => r.stamp)).size, 1);
  t.same(readdirSync(raceDir), [path.basename(cacheFileOf(folder, shape, raceDir))], 'one cache, no temporary left');
  t.equal((await prepareImageFolder(folder, shape, raceDir)).decoded, 0, 'and it is whole');
});

t.test('channels: 1 is grey, 4 keeps an alpha channel (opaque: 1); 2 is refused', async t => {
  const cacheDir = path.join(root, 'channel-cache');
  for (const c of [1, 4]) {
    const { stamp } = await prepareImageFolder(dir, [4, 6, c], cacheDir);
    const ds = await openImageFolder({ kind: 'image-folder', dir, imageShape: [4, 6, c], cacheDir, stamp });
    t.same(ds.sampleShape, [4, 6, c]);
    const out = new Float32Array(4 * 6 * c);
    ds.read(0, out, 0);
    t.ok(
      out.every(v => v >= 0 && v <= 1),
      `${c} channel(s): values in [0, 1]`,
    );
    if (c === 4)
      t.ok(
        out.filter((_, i) => i % 4 === 3).every(v => v === 1),
        'alpha of an opaque image: 1',
      );
  }
  await t.rejects(prepareImageFolder(dir, [4, 6, 2], cacheDir), { code: 'BAD_CONFIG', message: /not 2/ });
});

t.test('a corrupt image is refused before any thread, naming its path; the cache is not written', async t => {
  const folder = path.join(root, 'corrupt');
  copyFolder(folder);
  const broken = path.join(folder, 'cat', 'broken.jpg');
  writeFileSync(broken, 'this is no JPEG');
  const threads = osThreads();
  await t.rejects(train({ ...base, data: folder, steps: 1 }), {
    code: 'BAD_DATA',
    message: new RegExp(
      `1 file\\(s\\) cannot be decoded as PNG, JPEG, GIF, WebP or BMP: ${broken.replace(/[.]/g, '\\.')} \\(`,
    ),
  });
  t.equal(osThreads(), threads, 'no thread started');
  t.same(readdirSync(path.join(folder, '.tandem-cache')), [], 'no cache and no temporary file left');
  // a TIFF named .png: sharp decodes it by what it holds; it was trained on, though the folder takes no TIFF
  rmSync(broken);
  const tiff = path.join(folder, 'cat', 'really-tiff.png');
  writeFileSync(
    tiff,
    await sharp({ create: { width: 3, height: 3, channels: 3, background: '#123456' } })
      .tiff()
      .toBuffer(),
  );
  await t.rejects(train({ ...base, data: folder, steps: 1 }), {
    code: 'BAD_DATA',
    message:
      /cannot be decoded as PNG, JPEG, GIF, WebP or BMP: .*really-tiff\.png \(it holds a tiff image, not PNG, JPEG/,
  });
  const empty = path.join(root, 'no-classes');
  mkdirSync(path.join(empty, '.hidden'), { recursive: true });
  await t.rejects(train({ ...base, data: empty }), {
    code: 'BAD_DATA',
    message: /an image folder has one subfolder per class .*no-classes has none/,
  });
});

t.test('resume mid-epoch is exact (indices of the folder, shuffled)', async t => {
  const ckpt = path.join(root, 'ckpt');
  const run: TrainConfig = { ...base, epochs: 2, seed: 3, heldOut: 6 }; // 30 train: 5 steps an epoch
  const full = await train({ ...run, checkpointEvery: 7, checkpointDir: ckpt });
  const at = path.join(ckpt, 'checkpoint-000000007.tandem');
  t.ok(existsSync(at), 'checkpoint at step 7, in the second epoch');
  // The cache may move (another --data-cache): the samples are the same.
  const resumed = await train({ ...run, resume: at, dataCache: path.join(root, 'moved-cache') });
  t.equal(resumed.firstStep, 8);
  t.ok(
    resumed.weights.every((w, k) => w.values.every((v, i) => v === full.weights[k].values[i])),
    '7 + 3 steps = 10 uninterrupted steps, bit for bit',
  );
});
