/**
 * An image folder's cache file: every image decoded and resized once, as bytes ([h, w, c] per image, in sample
 * order), behind a manifest of the files it was built from (path, size, modification time, label) and the shape.
 * The cache is used while the folder's listing equals the manifest; a file added, removed, resized or touched
 * rebuilds it, decoding only the files that changed (the others' bytes are copied from the old cache). A build
 * writes a temporary file and renames it over the cache, so concurrent builders (threads, processes, hosts on one
 * disk) never leave a partial cache: a reader sees the old one or the new one.
 *
 * Layout: 8 bytes `TNDMIMG1`, a uint32 (little-endian) manifest length, the manifest (JSON), zeros up to a multiple
 * of 64 bytes, then the images' bytes.
 */
import { closeSync, constants, fstatSync, mkdirSync, openSync, readSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { TandemError } from '../errors.js';
import { temporaryNameFor } from '../output/atomic-write.js';
import { fsReason } from '../output/fs-reason.js';
import type { ImageListing } from './image-files.js';
import { decodeImage, IMAGE_FORMAT_WORDS } from './image-decode.js';

const MAGIC = 'TNDMIMG1';
const ALIGN = 64;
/** Images decoded at once while building (libvips runs each on its own threads too). */
const IN_FLIGHT = 4;

export type Shape3 = readonly [number, number, number];

/** The manifest's text and its SHA-1 (the stamp a thread checks the cache against). */
export function manifestOf(listing: ImageListing, shape: Shape3): { text: string; stamp: string } {
  const files = listing.files.map(f => [f.rel, f.size, f.mtimeMs, f.label]);
  const text = JSON.stringify({ version: 1, shape, classNames: listing.classNames, files });
  return { text, stamp: createHash('sha1').update(text).digest('hex') };
}

/** The cache file of folder `dir` at `shape` in `cacheDir`. */
export function cacheFileOf(dir: string, shape: Shape3, cacheDir: string): string {
  const id = createHash('sha1').update(path.resolve(dir)).digest('hex').slice(0, 12);
  return path.join(cacheDir, `images-${id}-${shape.join('x')}.tandem-cache`);
}

/** An open cache file: its manifest, stamp and where the images start. */
export interface OpenCache {
  fd: number;
  stamp: string;
  manifest: { shape: number[]; classNames: string[]; files: [string, number, number, number][] };
  dataOffset: number;
}

/**
 * The cache at `file`, or undefined when there is none, it is not whole, or it is not a regular file (a build then
 * replaces it). Opened with O_NONBLOCK: a FIFO planted there would otherwise block the open until a writer came.
 */
export function openCache(file: string): OpenCache | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    if (!fstatSync(fd).isFile()) throw new Error('not a regular file'); // a device would be read forever
    const head = Buffer.alloc(12);
    if (readSync(fd, head, 0, 12, 0) !== 12 || head.toString('latin1', 0, 8) !== MAGIC) throw new Error('not a cache');
    const length = head.readUInt32LE(8);
    const size = fstatSync(fd).size;
    if (12 + length > size) throw new Error('short'); // never allocate what the file does not hold
    const text = Buffer.alloc(length);
    if (readSync(fd, text, 0, length, 12) !== length) throw new Error('short');
    const manifest = checkedManifest(JSON.parse(text.toString('utf8')));
    const dataOffset = align(12 + length);
    const row = manifest.shape.reduce((a, b) => a * b, 1);
    if (size !== dataOffset + row * manifest.files.length) throw new Error('truncated');
    return { fd, stamp: createHash('sha1').update(text).digest('hex'), manifest, dataOffset };
  } catch {
    closeSync(fd);
    return undefined;
  }
}

const align = (n: number): number => Math.ceil(n / ALIGN) * ALIGN;

const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/**
 * A cache's manifest as buildCache writes it (the file may be anyone's: a folder from elsewhere brings its
 * `.tandem-cache`); a manifest of another shape throws, and the cache is rebuilt.
 */
function checkedManifest(m: unknown): OpenCache['manifest'] {
  const o = (m ?? {}) as Partial<Record<keyof OpenCache['manifest'], unknown>>;
  const file = (f: unknown) =>
    Array.isArray(f) &&
    f.length === 4 &&
    typeof f[0] === 'string' &&
    isCount(f[1]) &&
    typeof f[2] === 'number' &&
    isCount(f[3]);
  if (
    !Array.isArray(o.shape) ||
    o.shape.length !== 3 ||
    !o.shape.every(isCount) ||
    !Array.isArray(o.classNames) ||
    !o.classNames.every(n => typeof n === 'string') ||
    !Array.isArray(o.files) ||
    !o.files.every(file)
  )
    throw new Error('not a manifest');
  return o as OpenCache['manifest'];
}

/**
 * Builds the cache of `listing` (folder `dir`) at `file`, reusing the images of `old` whose file is unchanged; returns
 * how many images were decoded. A file that cannot be decoded is BAD_DATA naming every such file (none is skipped).
 */
export async function buildCache(
  file: string,
  dir: string,
  listing: ImageListing,
  shape: Shape3,
  old?: OpenCache,
): Promise<number> {
  const { text } = manifestOf(listing, shape);
  const manifest = Buffer.from(text, 'utf8');
  const dataOffset = align(12 + manifest.length);
  const row = shape[0] * shape[1] * shape[2];
  const reusable = reusableRows(old, shape);
  makeCacheDir(path.dirname(file));
  const tmp = temporaryNameFor(file);
  const out = await open(tmp, 'wx').catch((err: unknown) => {
    throw cannotWrite(file, err);
  });
  let decoded = 0;
  const failures: string[] = [];
  try {
    const head = Buffer.alloc(12);
    head.write(MAGIC, 0, 'latin1');
    head.writeUInt32LE(manifest.length, 8);
    await out.write(head, 0, 12, 0);
    await out.write(manifest, 0, manifest.length, 12);
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let i = next++; i < listing.files.length; i = next++) {
        const f = listing.files[i];
        const at = reusable.get(`${f.rel}\n${f.size}\n${f.mtimeMs}`);
        let bytes: Uint8Array;
        if (old && at !== undefined) {
          bytes = new Uint8Array(row);
          readSync(old.fd, bytes, 0, row, old.dataOffset + at * row);
        } else {
          try {
            bytes = await decodeImage(path.join(dir, f.rel), shape);
            decoded++;
          } catch (err) {
            failures.push(`${path.join(dir, f.rel)} (${err instanceof Error ? err.message : String(err)})`);
            continue;
          }
        }
        await out.write(bytes, 0, row, dataOffset + i * row);
      }
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
    if (failures.length > 0) throw undecodable(dir, failures);
    await out.close();
    await rename(tmp, file).catch((err: unknown) => {
      throw cannotWrite(file, err);
    });
  } catch (err) {
    await out.close().catch(() => {});
    await rm(tmp, { force: true });
    throw err;
  }
  return decoded;
}

/** `rel\nsize\nmtime` → row in `old`, for the images a rebuild can copy. */
function reusableRows(old: OpenCache | undefined, shape: Shape3): Map<string, number> {
  const rows = new Map<string, number>();
  if (!old || old.manifest.shape.join('x') !== shape.join('x')) return rows;
  old.manifest.files.forEach(([rel, size, mtimeMs], i) => rows.set(`${rel}\n${size}\n${mtimeMs}`, i));
  return rows;
}

function makeCacheDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw cannotWrite(dir, err);
  }
}

function cannotWrite(place: string, err: unknown): TandemError {
  return new TandemError(
    'WRITE_FAILED',
    `image cache: cannot write ${place}: ${fsReason(err)}; give a writable cache directory with --data-cache DIR`,
    undefined,
    { cause: err },
  );
}

function undecodable(dir: string, failures: string[]): TandemError {
  failures.sort();
  const shown = failures.slice(0, 10).join('; ') + (failures.length > 10 ? `; and ${failures.length - 10} more` : '');
  return new TandemError(
    'BAD_DATA',
    `image folder ${dir}: ${failures.length} file(s) cannot be decoded as ${IMAGE_FORMAT_WORDS}: ${shown}. ` +
      'Remove or replace them (tandem trains on every image of the folder, and skips none)',
  );
}
