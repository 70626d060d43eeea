/**
 * The images of a folder laid out as Keras' `image_dataset_from_directory` reads it: each subfolder of DIR is a
 * class (in sorted order: label 0 is the first name), its PNG, JPEG, GIF, WebP and BMP files (at any depth) the
 * samples. Names that start with a dot are skipped (DIR/.tandem-cache among them), as are files directly in DIR and
 * files of other extensions (counted by extension, so that the run can say what it left out). The samples are ordered
 * by a hash of their path (SHA-1 of `class/file`): a fixed order that mixes the classes, the same on every machine and
 * run, so the held-out samples (`--held-out N`: the last N) are a split by file with every class in it, and a file
 * keeps its side of the split when others are added.
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
  /** Files in the class folders of other extensions, by extension (lower case; '' for none). */
  leftOut: Record<string, number>;
}

export const IMAGE_EXTENSIONS = ['.png', '.jpg', '.jpeg', '.gif', '.webp', '.bmp'] as const;

const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export function listImageFolder(dir: string): ImageListing {
  const st = statSync(dir, { throwIfNoEntry: false });
  if (!st?.isDirectory()) throw new TandemError('BAD_DATA', `--data ${dir}: no such directory`);
  const classNames = entriesOf(dir, '')
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
  const walked = new Map<string, string>();
  const leftOut: Record<string, number> = {};
  classNames.forEach((name, label) => {
    for (const rel of imagesUnder(dir, name, walked, leftOut)) {
      const s = statSync(path.join(dir, rel));
      files.push({ rel, size: s.size, mtimeMs: s.mtimeMs, label, key: createHash('sha1').update(rel).digest('hex') });
    }
  });
  if (files.length === 0) {
    throw new TandemError(
      'BAD_DATA',
      `--data ${dir}: its class folders (${classNames.join(', ')}) hold no ${IMAGE_EXTENSIONS.join(', ')} file` +
        (Object.keys(leftOut).length > 0 ? ` (${leftOutWords(leftOut)})` : ''),
    );
  }
  files.sort((a, b) => byCodeUnit(a.key, b.key) || byCodeUnit(a.rel, b.rel));
  return { classNames, files: files.map(({ key, ...f }) => (void key, f)), leftOut };
}

/** Class names that are a dataset's splits, not classes: the folder given is one level too high. */
const SPLIT_NAMES = new Set(['train', 'training', 'val', 'valid', 'validation', 'test', 'testing', 'eval', 'dev']);

/**
 * What a run says of a listed folder before it starts: the files of other extensions it left out; classes that are
 * all a dataset's splits (`train`, `val`), which Keras would train on as classes too.
 */
export function listingNotes(dir: string, listing: ImageListing): string[] {
  const { files, classNames, leftOut } = listing;
  const notes: string[] = [];
  if (Object.keys(leftOut).length > 0)
    notes.push(
      `--data ${dir}: ${files.length} images in ${classNames.length} classes; ${leftOutWords(leftOut)} (tandem ` +
        `trains the ${IMAGE_EXTENSIONS.join(', ')} files; convert the others to one of these to train on them)`,
    );
  if (classNames.every(c => SPLIT_NAMES.has(c.toLowerCase())))
    notes.push(
      `--data ${dir}: its classes are ${classNames.join(', ')}, which name a dataset's splits, not classes; if each ` +
        `holds a folder per class, give --data ${path.join(dir, classNames[0])} (and hold samples out with ` +
        '--held-out N)',
    );
  return notes;
}

/** `leftOut` in words: "3 other files left out: .bmp 2, .txt 1". */
function leftOutWords(leftOut: Record<string, number>): string {
  const entries = Object.entries(leftOut).sort(([a], [b]) => byCodeUnit(a, b));
  const total = entries.reduce((n, [, count]) => n + count, 0);
  const each = entries.map(([ext, count]) => `${ext || 'no extension'} ${count}`).join(', ');
  return `${total} other file${total === 1 ? '' : 's'} left out: ${each}`;
}

/**
 * The image files under DIR/`rel` (paths from DIR, `/`-separated), at any depth, sorted. Symbolic links are followed,
 * but each folder is read once (`walked`: real path → the path it was read by): a link back up the tree (a loop) or a
 * second path to one folder is refused by name, never walked forever nor read twice.
 */
function imagesUnder(dir: string, rel: string, walked: Map<string, string>, leftOut: Record<string, number>): string[] {
  const real = realOf(dir, rel);
  const before = walked.get(real);
  if (before !== undefined) {
    const how = rel.startsWith(`${before}/`) ? 'forever (a symbolic link loop)' : 'twice (two paths to one folder)';
    throw new TandemError(
      'BAD_DATA',
      `--data ${dir}: ${path.join(dir, rel)} is the folder ${path.join(dir, before)} again: its images would be ` +
        `read ${how}; remove the link`,
    );
  }
  walked.set(real, rel);
  const out: string[] = [];
  for (const name of entriesOf(dir, rel).sort(byCodeUnit)) {
    if (name.startsWith('.')) continue;
    const child = `${rel}/${name}`;
    const ext = path.extname(name).toLowerCase();
    const image = (IMAGE_EXTENSIONS as readonly string[]).includes(ext);
    const s = statOf(dir, child, image);
    if (s?.isDirectory()) out.push(...imagesUnder(dir, child, walked, leftOut));
    else if (s?.isFile() && image) out.push(child);
    else if (s?.isFile()) leftOut[ext] = (leftOut[ext] ?? 0) + 1;
  }
  return out;
}

/** BAD_DATA naming DIR/`rel` and why the file system refused it. */
function unreadable(dir: string, rel: string, err: unknown): TandemError {
  return new TandemError(
    'BAD_DATA',
    `--data ${dir}: cannot read ${path.join(dir, rel)}: ${fsReason(err)}; fix or remove it (tandem trains on every ` +
      'image of the folder)',
    undefined,
    { cause: err },
  );
}

function entriesOf(dir: string, rel: string): string[] {
  try {
    return readdirSync(path.join(dir, rel));
  } catch (err) {
    throw unreadable(dir, rel, err);
  }
}

/**
 * DIR/`rel`'s status through its links, undefined when it is gone; a link to nothing is BAD_DATA naming it when it
 * `matters` (a class, or an image that would go missing without a word), as is a file that cannot be read.
 */
function statOf(dir: string, rel: string, matters = true): Stats | undefined {
  const file = path.join(dir, rel);
  try {
    const s = statSync(file, { throwIfNoEntry: false });
    if (s || !matters || !lstatSync(file, { throwIfNoEntry: false })?.isSymbolicLink()) return s;
  } catch (err) {
    throw unreadable(dir, rel, err);
  }
  throw new TandemError(
    'BAD_DATA',
    `--data ${dir}: ${file} is a symbolic link to nothing (its target is gone); remove it or point it at a ` +
      `${rel.includes('/') ? 'file' : 'folder'}`,
  );
}

function realOf(dir: string, rel: string): string {
  try {
    return realpathSync(path.join(dir, rel));
  } catch (err) {
    throw unreadable(dir, rel, err);
  }
}
