// An image folder from elsewhere is data (docs/guide/security.md): its `.tandem-cache` may be anyone's, and its
// symbolic links may lead anywhere. A cache whose manifest has fields of the wrong type, or whose declared manifest
// length passes the file's end, is rebuilt (never a TypeError, never an allocation of what the file does not hold). A
// symbolic link loop, a second path to one folder and a dangling link among the classes are each named (BAD_DATA),
// never walked forever, skipped nor crashed on.
import t from 'tap';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { prepareImageFolder } from '../src/data/image-folder.js';
import { cacheFileOf, type Shape3 } from '../src/data/image-cache.js';
import { listImageFolder } from '../src/data/image-files.js';
import { folderCacheDir } from '../src/config/prepare-file-data.js';
import { pngBytes } from './fixtures/image-folder.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'tandem-untrusted-images-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
const SHAPE: Shape3 = [4, 4, 3];
const ROW = 4 * 4 * 3;

/** A folder of classes `a` and `b`, one 4x4 PNG each. */
function folder(name: string): string {
  const dir = path.join(root, name);
  for (const c of ['a', 'b']) {
    mkdirSync(path.join(dir, c), { recursive: true });
    writeFileSync(path.join(dir, c, '1.png'), pngBytes(Buffer.alloc(4 * 4 * 4, 120), 4, 4));
  }
  return dir;
}

/** A cache file's bytes as buildCache lays them out, around `manifest` (any JSON) and `rows` rows of images. */
function cacheBytes(manifest: unknown, rows: number): Buffer {
  const text = Buffer.from(JSON.stringify(manifest));
  const dataOffset = Math.ceil((12 + text.length) / 64) * 64;
  const out = Buffer.alloc(dataOffset + rows * ROW);
  out.write('TNDMIMG1', 0, 'latin1');
  out.writeUInt32LE(text.length, 8);
  text.copy(out, 12);
  return out;
}

t.test('a cache of another shape is rebuilt, never trusted', async t => {
  const dir = folder('cache');
  const cacheDir = path.join(dir, '.tandem-cache');
  const file = cacheFileOf(dir, SHAPE, cacheDir);
  const manifest = { version: 1, shape: SHAPE, classNames: ['a', 'b'] };
  const pastTheEnd = Buffer.alloc(12);
  pastTheEnd.write('TNDMIMG1', 0, 'latin1');
  pastTheEnd.writeUInt32LE(0xffff_fff0, 8); // a manifest of 4 GiB declared, in a file of 12 bytes
  const cases: [string, Buffer][] = [
    ['files a string', cacheBytes({ ...manifest, files: 'xy' }, 2)],
    ['files numbers', cacheBytes({ ...manifest, files: [1, 2] }, 2)],
    ['a file entry of the wrong types', cacheBytes({ ...manifest, files: [[1, 'a', null, {}]] }, 1)],
    ['shape not [h, w, c]', cacheBytes({ ...manifest, shape: [ROW], files: [['a/1.png', 1, 2, 0]] }, 1)],
    ['classNames not strings', cacheBytes({ ...manifest, classNames: [{}], files: [] }, 0)],
    ['null', cacheBytes(null, 0)],
    ['a manifest length past the end', pastTheEnd],
  ];
  mkdirSync(cacheDir, { recursive: true });
  for (const [name, bytes] of cases) {
    writeFileSync(file, bytes);
    const built = await prepareImageFolder(dir, SHAPE, cacheDir);
    t.equal(built.decoded, 2, `${name}: rebuilt, both images decoded`);
    t.equal((await prepareImageFolder(dir, SHAPE, cacheDir)).decoded, 0, `${name}: the rebuilt cache is used`);
  }
});

t.test('symbolic links: a loop, a second path and a dangling class link are named', async t => {
  const loop = folder('loop');
  symlinkSync('.', path.join(loop, 'a', 'again'));
  t.throws(() => listImageFolder(loop), {
    code: 'BAD_DATA',
    message:
      `${path.join(loop, 'a', 'again')} is the folder ${path.join(loop, 'a')} again: its images would be read ` +
      'forever',
  });
  const twice = folder('twice');
  symlinkSync(path.join('..', 'a'), path.join(twice, 'b', 'also-a'));
  t.throws(() => listImageFolder(twice), {
    code: 'BAD_DATA',
    message: /b\/also-a is the folder .*\/twice\/a again: its images would be read twice \(two paths to one folder\)/,
  });
  const dangling = folder('dangling');
  symlinkSync(path.join(root, 'nothing-here'), path.join(dangling, 'c'));
  t.throws(() => listImageFolder(dangling), {
    code: 'BAD_DATA',
    message: /dangling\/c is a symbolic link to nothing \(its target is gone\); remove it or point it at a folder/,
  });
});

t.test('a FIFO or a device where the cache file belongs is replaced, never read', async t => {
  const dir = folder('fifo');
  const cacheDir = path.join(dir, '.tandem-cache');
  mkdirSync(cacheDir, { recursive: true });
  const file = cacheFileOf(dir, SHAPE, cacheDir);
  execFileSync('mkfifo', [file]); // a reader would block forever: open() waits for a writer
  const built = await prepareImageFolder(dir, SHAPE, cacheDir);
  t.equal(built.decoded, 2, 'the FIFO is replaced by a cache, both images decoded');
  t.ok(lstatSync(file).isFile(), 'the cache is a regular file now');
  rmSync(file);
  symlinkSync('/dev/zero', file); // a device reads forever
  t.equal((await prepareImageFolder(dir, SHAPE, cacheDir)).decoded, 2, 'a link to /dev/zero: replaced, rebuilt');
  t.equal((await prepareImageFolder(dir, SHAPE, cacheDir)).decoded, 0, 'the rebuilt cache is used');
});

t.test("a folder's own .tandem-cache that is a symbolic link is refused, never written through", async t => {
  const dir = folder('cache-link');
  const elsewhere = path.join(root, 'elsewhere');
  mkdirSync(elsewhere);
  symlinkSync(elsewhere, path.join(dir, '.tandem-cache'));
  t.throws(() => folderCacheDir(dir, undefined), {
    code: 'BAD_DATA',
    message:
      `image folder ${dir}: its cache directory ${path.join(dir, '.tandem-cache')} is a symbolic link (to ` +
      `${elsewhere}): tandem would write its cache where the link leads; remove the link, or give a cache ` +
      'directory with --data-cache DIR',
  });
  t.same(readdirSync(elsewhere), [], 'nothing written where the link leads');
  const given = path.join(root, 'given-cache');
  symlinkSync(elsewhere, given); // a link the user names is theirs to follow
  const cacheDir = folderCacheDir(dir, given);
  t.equal(cacheDir, given, "--data-cache through a link of the user's: used as given");
  t.equal((await prepareImageFolder(dir, SHAPE, cacheDir)).decoded, 2, 'the cache built there');
  t.equal(readdirSync(elsewhere).length, 1, 'written where the named link leads');
  const plain = folder('cache-plain');
  t.equal(folderCacheDir(plain, undefined), path.join(plain, '.tandem-cache'), 'no cache yet: the default');
});
