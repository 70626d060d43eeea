/**
 * `--data DIR`, an image folder (image-files.ts: one subfolder per class), as a tandem `Dataset`: the main thread
 * lists the folder and finds or builds its cache (image-cache.ts), and hands every thread the cache's stamp; a thread
 * opens the cache, checks the stamp and reads each sample's bytes from the file (scaled to [0, 1]): no thread decodes
 * an image when the cache is warm, and none lists the folder again unless the cache was replaced.
 */
import { closeSync, readSync } from 'node:fs';
import { TandemError } from '../errors.js';
import type { Dataset } from './dataset.js';
import type { ImageFolderSpec } from './file-data-spec.js';
import { listImageFolder, listingNotes } from './image-files.js';
import { buildCache, cacheFileOf, manifestOf, openCache, type OpenCache, type Shape3 } from './image-cache.js';

/**
 * What preparing a folder found: the cache's stamp and file, how many images it decoded (0: the cache held), and what
 * the run should say of the folder before it starts (image-files.ts's listingNotes).
 */
export interface PreparedImageFolder {
  stamp: string;
  cacheFile: string;
  decoded: number;
  notes: string[];
}

/** Lists `dir` and makes its cache current (built when absent, rebuilt when a file changed). */
export async function prepareImageFolder(dir: string, shape: Shape3, cacheDir: string): Promise<PreparedImageFolder> {
  refuseChannels(shape);
  const listing = listImageFolder(dir);
  const { stamp } = manifestOf(listing, shape);
  const cacheFile = cacheFileOf(dir, shape, cacheDir);
  const existing = openCache(cacheFile);
  const notes = listingNotes(dir, listing);
  try {
    if (existing?.stamp === stamp) return { stamp, cacheFile, decoded: 0, notes };
    const decoded = await buildCache(cacheFile, dir, listing, shape, existing);
    return { stamp, cacheFile, decoded, notes };
  } finally {
    if (existing) closeSync(existing.fd);
  }
}

/** The dataset of `spec`, read from its cache (rebuilt first if it is not the one the main thread checked). */
export async function openImageFolder(spec: ImageFolderSpec): Promise<Dataset> {
  const file = cacheFileOf(spec.dir, spec.imageShape, spec.cacheDir);
  let cache = openCache(file);
  if (cache?.stamp !== spec.stamp) {
    if (cache) closeSync(cache.fd);
    const again = await prepareImageFolder(spec.dir, spec.imageShape, spec.cacheDir);
    cache = openCache(file);
    if (again.stamp !== spec.stamp || cache?.stamp !== spec.stamp) {
      if (cache) closeSync(cache.fd);
      throw new TandemError(
        'BAD_DATA',
        `image folder ${spec.dir} changed while the run started (a file was added, removed or rewritten after the ` +
          'folder was listed); leave it unchanged during a run, and start the run again',
      );
    }
  }
  return cachedImages(cache, spec);
}

function cachedImages(cache: OpenCache, spec: ImageFolderSpec): Dataset {
  const { fd, dataOffset, manifest } = cache;
  const row = spec.imageShape[0] * spec.imageShape[1] * spec.imageShape[2];
  const labels = Int32Array.from(manifest.files, f => f[3]);
  const bytes = new Uint8Array(row);
  const scale = Float32Array.from({ length: 256 }, (_, b) => b / 255);
  return {
    size: labels.length,
    sampleShape: [...spec.imageShape],
    classes: manifest.classNames.length,
    classNames: manifest.classNames,
    label: index => labels[index],
    read(index, out, offset) {
      const got = readSync(fd, bytes, 0, row, dataOffset + index * row);
      if (got !== row)
        throw new TandemError('BAD_DATA', `image cache of ${spec.dir}: sample ${index} is cut short in the cache file`);
      for (let k = 0; k < row; k++) out[offset + k] = scale[bytes[k]];
      return labels[index];
    },
  };
}

function refuseChannels(shape: Shape3): void {
  if ([1, 3, 4].includes(shape[2])) return;
  throw new TandemError(
    'BAD_CONFIG',
    `--image-size ${shape.join('x')}: an image folder gives 1 (grey), 3 (RGB) or 4 (RGBA) channels, not ${shape[2]}`,
  );
}
