/**
 * The images of a folder laid out as Keras' `image_dataset_from_directory` reads it: each subfolder of DIR is a
 * class (in sorted order: label 0 is the first name), its PNG and JPEG files (at any depth) the samples. Names that
 * start with a dot are skipped (DIR/.tandem-cache among them), as are files of other extensions and files directly in
 * DIR. The samples are ordered by a hash of their path (SHA-1 of `class/file`): a fixed order that mixes the classes,
 * the same on every machine and every run, so the held-out samples (`--held-out N`: the last N) are a split by file
 * with every class in it, and a file keeps its side of the split when others are added.
 */
import { lstatSync, readdirSync, realpathSync, statSync, type Stats } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { TandemError } from '../errors.js';
import { fsReason } from '../output/fs-reason.js';

/** One image: its path from DIR (with `/`), its size and time (what the cache is checked against), its label. */
export interface ImageFile {
  rel: string;
  size: number;
  mtimeMs: number;
  label: number;
}

export interface ImageListing {
  classNames: string[];
  /** In sample order. */
  files: ImageFile[];
}

export const IMAGE_EXTENSIONS = ['.png', '.jpg', '.jpeg'] as const;

const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export function listImageFolder(dir: string): ImageListing {
  const st = statSync(dir, { throwIfNoEntry: false });
  if (!st?.isDirectory()) throw new TandemError('BAD_DATA', `--data ${dir}: no such directory`);
  const classNames = entries(dir, '')
    .filter(name => !name.startsWith('.') && statOf(dir, name)?.isDirectory())
    .sort(byCodeUnit);
  if (classNames.length === 0) {
    throw new TandemError(
      'BAD_DATA',
      `--data ${dir}: an image folder has one subfolder per class (${path.join(dir, 'cat', '1.jpg')}, ` +
        `${path.join(dir, 'dog', '2.png')}), and ${dir} has none; or give a data module (an ES module) or a .csv file`,
    );
  }
  const files: (ImageFile & { key: string })[] = [];
  classNames.forEach((name, label) => {
    for (const rel of imagesUnder(dir, name, [realpathSync(dir)])) {
      const s = statOf(dir, rel) as Stats;
      files.push({ rel, size: s.size, mtimeMs: s.mtimeMs, label, key: createHash('sha1').update(rel).digest('hex') });
    }
  });
  if (files.length === 0) {
    throw new TandemError(
      'BAD_DATA',
      `--data ${dir}: its class folders (${classNames.join(', ')}) hold no ${IMAGE_EXTENSIONS.join(', ')} file`,
    );
  }
  files.sort((a, b) => byCodeUnit(a.key, b.key) || byCodeUnit(a.rel, b.rel));
  return { classNames, files: files.map(({ key, ...f }) => (void key, f)) };
}

/**
 * The image files under DIR/`rel` (paths from DIR, `/`-separated), at any depth, sorted; `above`: the real paths of
 * the folders it is in (a link back to one of them is a loop, refused).
 */
function imagesUnder(dir: string, rel: string, above: string[]): string[] {
  const real = realpathSync(path.join(dir, rel));
  if (above.includes(real))
    throw new TandemError(
      'BAD_DATA',
      `--data ${dir}: ${path.join(dir, rel)} is a link to ${real}, a folder it is in, so its images would be read ` +
        'without end; remove the link',
    );
  const out: string[] = [];
  for (const name of entries(dir, rel).sort(byCodeUnit)) {
    if (name.startsWith('.')) continue;
    const child = `${rel}/${name}`;
    const image = (IMAGE_EXTENSIONS as readonly string[]).includes(path.extname(name).toLowerCase());
    const s = statOf(dir, child, image);
    if (s?.isDirectory()) out.push(...imagesUnder(dir, child, [...above, real]));
    else if (s?.isFile() && image) out.push(child);
  }
  return out;
}

/** The names in DIR/`rel`, else BAD_DATA naming the folder and why it cannot be listed. */
function entries(dir: string, rel: string): string[] {
  try {
    return readdirSync(path.join(dir, rel));
  } catch (err) {
    throw new TandemError('BAD_DATA', `--data ${dir}: cannot list ${path.join(dir, rel)}: ${fsReason(err)}`);
  }
}

/**
 * DIR/`rel`'s stats (through links), undefined when it is gone; a link to nothing is BAD_DATA naming it when it
 * `matters` (a class or an image that would be missing without a word), as is a file that cannot be read.
 */
function statOf(dir: string, rel: string, matters = true): Stats | undefined {
  const file = path.join(dir, rel);
  try {
    const s = statSync(file, { throwIfNoEntry: false });
    if (s || !matters || !lstatSync(file, { throwIfNoEntry: false })?.isSymbolicLink()) return s;
  } catch (err) {
    throw new TandemError('BAD_DATA', `--data ${dir}: cannot read ${file}: ${fsReason(err)}`);
  }
  throw new TandemError(
    'BAD_DATA',
    `--data ${dir}: ${file} is a symbolic link to nothing (its target is gone); remove it or point it at a ` +
      `${rel.includes('/') ? 'file' : 'folder'}`,
  );
}
