// An image folder's GIF and WebP files train beside PNG and JPEG (an animated GIF or WebP: its first frame, as sharp
// reads it); files of other extensions are left out and the run says so once, counting them by extension; a folder
// of only such files is refused, naming what it holds; a TIFF named .png is refused as before. A folder whose classes
// are a dataset's splits (train, val) trains, with a warning naming the folder meant; a folder of one class is
// refused, saying a classifier of one class trains nothing.
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { train, type RunEvent, type TrainConfig } from '../src/index.js';
import { openImageFolder, prepareImageFolder } from '../src/data/image-folder.js';
import { pngBytes, writeImageModel } from './fixtures/image-folder.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'tandem-image-formats-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
const W = 4,
  H = 3;

/** Solid RGB frames, one after the other (sharp's pages), as raw bytes. */
function frames(...colours: [number, number, number][]): Buffer {
  const out = Buffer.alloc(W * H * 3 * colours.length);
  colours.forEach((c, f) => {
    for (let k = 0; k < W * H; k++) out.set(c, (f * W * H + k) * 3);
  });
  return out;
}

const raw = (colours: [number, number, number][]) =>
  sharp(frames(...colours), { raw: { width: W, height: H * colours.length, channels: 3, pageHeight: H } });

const RED: [number, number, number] = [255, 0, 0];
const GREEN: [number, number, number] = [0, 255, 0];
const BLUE: [number, number, number] = [0, 0, 255];

/** Class `a`: a GIF, an animated GIF (red, then blue), a lossless WebP, an animated WebP; class `b`: a PNG. */
async function writeFolder(dir: string): Promise<Record<string, [number, number, number]>> {
  mkdirSync(path.join(dir, 'a'), { recursive: true });
  mkdirSync(path.join(dir, 'b'), { recursive: true });
  await raw([GREEN])
    .gif()
    .toFile(path.join(dir, 'a', 'still.gif'));
  await raw([RED, BLUE])
    .gif()
    .toFile(path.join(dir, 'a', 'moving.GIF'));
  await raw([BLUE])
    .webp({ lossless: true })
    .toFile(path.join(dir, 'a', 'still.webp'));
  await raw([GREEN, RED])
    .webp({ lossless: true })
    .toFile(path.join(dir, 'a', 'moving.webp'));
  const rgba = Buffer.alloc(W * H * 4, 255);
  writeFileSync(path.join(dir, 'b', 'white.png'), pngBytes(rgba, W, H));
  return { 'a/still.gif': GREEN, 'a/moving.GIF': RED, 'a/still.webp': BLUE, 'a/moving.webp': GREEN };
}

t.test('GIF and WebP train beside PNG: each sample is its first frame', async t => {
  const dir = path.join(root, 'formats');
  const expected = await writeFolder(dir);
  const shape: [number, number, number] = [H, W, 3];
  const cacheDir = path.join(dir, '.tandem-cache');
  const prepared = await prepareImageFolder(dir, shape, cacheDir);
  t.equal(prepared.decoded, 5, 'all 5 images decoded');
  t.same(prepared.notes, [], 'nothing to say: nothing left out');
  const ds = await openImageFolder({ kind: 'image-folder', dir, imageShape: shape, cacheDir, stamp: prepared.stamp });
  t.equal(ds.size, 5);
  const seen: string[] = [];
  const out = new Float32Array(H * W * 3);
  for (let i = 0; i < ds.size; i++) {
    const label = ds.read(i, out, 0);
    const first = [out[0], out[1], out[2]].map(v => Math.round(v * 255));
    const uniform = out.every((v, k) => v === out[k % 3]);
    seen.push(`${label}:${first.join(',')}:${uniform}`);
  }
  const want = [...Object.values(expected).map(c => `0:${c.join(',')}:true`), '1:255,255,255:true'];
  t.same(seen.sort(), want.sort(), 'every sample: its label, its first frame, every pixel alike');
});

t.test('files of other extensions: left out, counted in one warning; a folder of only those refused', async t => {
  const dir = path.join(root, 'left-out');
  await writeFolder(dir);
  writeFileSync(path.join(dir, 'a', 'notes.txt'), 'not an image');
  writeFileSync(path.join(dir, 'b', 'scan.tif'), 'II*');
  writeFileSync(path.join(dir, 'b', 'README'), 'x');
  mkdirSync(path.join(dir, 'b', 'deeper'));
  writeFileSync(path.join(dir, 'b', 'deeper', 'old.tif'), 'II*');
  writeFileSync(path.join(dir, 'b', '.DS_Store'), 'hidden: not counted');
  const model = path.join(root, 'model.mjs');
  writeImageModel(model);
  const events: RunEvent[] = [];
  const run: TrainConfig = { model, data: dir, imageSize: [H, W], devices: 2, backend: 'cpu', batch: 4, steps: 2 };
  const summary = await train(run, { onEvent: e => events.push(e) });
  t.equal(summary.steps, 2, 'trained');
  const warnings = events.flatMap(e => (e.type === 'warning' ? [e.message] : []));
  t.same(
    warnings.filter(m => m.includes('left out')),
    [
      `--data ${dir}: 5 images in 2 classes; 4 other files left out: no extension 1, .tif 2, .txt 1 (tandem trains ` +
        'the .png, .jpg, .jpeg, .gif, .webp, .bmp files; convert the others to one of these to train on them)',
    ],
    'one warning, each extension counted, dot files not',
  );
  const only = path.join(root, 'only-tif');
  mkdirSync(path.join(only, 'a'), { recursive: true });
  writeFileSync(path.join(only, 'a', 'x.tif'), 'II*');
  await t.rejects(train({ ...run, data: only }), {
    code: 'BAD_DATA',
    message: /hold no \.png, \.jpg, \.jpeg, \.gif, \.webp, \.bmp file \(1 other file left out: \.tif 1\)/,
  });
  // the folder one level too high: its classes are the splits (Keras trains on them as classes too)
  const splits = path.join(root, 'splits');
  await writeFolder(path.join(splits, 'train'));
  await writeFolder(path.join(splits, 'val'));
  const seen: string[] = [];
  await train({ ...run, data: splits }, { onEvent: e => e.type === 'warning' && seen.push(e.message) });
  t.same(
    seen,
    [
      `--data ${splits}: its classes are train, val, which name a dataset's splits, not classes; if each holds a ` +
        `folder per class, give --data ${path.join(splits, 'train')} (and hold samples out with --held-out N)`,
    ],
    'classes that are splits: one warning naming the folder meant',
  );
  const one = path.join(root, 'one-class');
  mkdirSync(path.join(one, 'cats'), { recursive: true });
  for (let i = 0; i < 8; i++)
    writeFileSync(path.join(one, 'cats', `${i}.png`), pngBytes(Buffer.alloc(W * H * 4, 255), W, H));
  await t.rejects(train({ ...run, data: one }), {
    code: 'BAD_DATA',
    message: /folder's classes are its subfolders, and it has 1 \(cats\).*add a folder per class \(2 or more\)/,
  });
  const tiff = path.join(root, 'tiff');
  await writeFolder(tiff);
  await raw([RED])
    .tiff()
    .toFile(path.join(tiff, 'b', 'really-tiff.png'));
  await t.rejects(train({ ...run, data: tiff }), {
    code: 'BAD_DATA',
    message: /cannot be decoded as PNG, JPEG, GIF, WebP or BMP: .*really-tiff\.png \(it holds a tiff image/,
  });
});
