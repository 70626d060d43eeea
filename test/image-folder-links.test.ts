// Symbolic links in an image folder: a class folder linked from elsewhere is read through the link (2 devices train
// on its images); a link to nothing (a class or an image: it would go missing without a word) and a link back to a
// folder it is in (a loop: Node's ELOOP with a path of 40 links) are BAD_DATA naming the link, before any thread.
import t from 'tap';
import { mkdtempSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, type TrainConfig } from '../src/index.js';
import { writeImageFolder, writeImageModel } from './fixtures/image-folder.js';
import { osThreads } from './fixtures/os-threads.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'tandem-image-links-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
const dir = path.join(root, 'images');
writeImageFolder(dir, 4); // ant, bee, cat: 4 images each
// cat's images live elsewhere; the folder links to them
renameSync(path.join(dir, 'cat'), path.join(root, 'cat-elsewhere'));
symlinkSync(path.join(root, 'cat-elsewhere'), path.join(dir, 'cat'));
const modelFile = path.join(root, 'model.mjs');
writeImageModel(modelFile);
const base: TrainConfig = { model: modelFile, data: dir, imageSize: [5, 5], devices: 2, backend: 'cpu', batch: 4 };

t.test('a class folder linked from elsewhere is read through the link', async t => {
  const summary = await train({ ...base, epochs: 1, heldOut: 0, shuffle: false });
  t.equal(summary.steps, 3, "12 images (cat's 4 through the link), batch 4");
});

t.test('a link to nothing and a loop are refused naming the link, before any thread', async t => {
  const threads = osThreads();
  const refused = async (message: RegExp) =>
    t.rejects(train({ ...base, steps: 1, dataCache: path.join(root, 'cache') }), { code: 'BAD_DATA', message });
  const gone = path.join(dir, 'dog');
  symlinkSync(path.join(root, 'no-such-folder'), gone);
  await refused(/images\/dog is a symbolic link to nothing \(its target is gone\); remove it or point it at a folder/);
  rmSync(gone);
  const image = path.join(dir, 'ant', 'img-9.png');
  symlinkSync(path.join(root, 'no-such.png'), image);
  await refused(/images\/ant\/img-9\.png is a symbolic link to nothing .*point it at a file/);
  rmSync(image);
  const loop = path.join(dir, 'bee', 'again');
  symlinkSync(path.join(dir, 'bee'), loop);
  await refused(
    /images\/bee\/again is the folder .*images\/bee again: its images would be read forever.*remove the link/,
  );
  rmSync(loop);
  t.equal(osThreads(), threads, 'all refused before any thread');
});
