/**
 * The prepare phase's part for the data files tandem reads itself: an image folder listed and its cache made current
 * (decoding what changed) on the main thread, before any thread starts; the dataset's spec carries the cache's stamp.
 */
import { lstatSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { TandemError } from '../errors.js';
import type { Dataset, DatasetSpec } from '../data/dataset.js';
import { isCsvFile, resolveDataset } from '../data/resolve-dataset.js';
import { csvStamp } from '../data/csv-dataset.js';
import { probeFirstSample } from '../data/dataset-checks.js';
import { prepareImageFolder } from '../data/image-folder.js';
import type { Shape3 } from '../data/image-cache.js';
import type { CheckedConfig } from './checked-config.js';
import type { PreparedData } from './prepared-data.js';

/** An image folder's images when neither --image-size nor the builtin model says a size. */
export const DEFAULT_FOLDER_SHAPE: Shape3 = [64, 64, 3];

/**
 * The cache directory of image folder `dir`: `given` (--data-cache), else DIR/.tandem-cache. A folder from elsewhere
 * is data: its own `.tandem-cache` as a symbolic link would have tandem write where the link leads, so it is refused
 * (a directory the user names is theirs, links and all).
 */
export function folderCacheDir(dir: string, given: string | undefined): string {
  if (given !== undefined) return path.resolve(given);
  const own = path.resolve(dir, '.tandem-cache');
  if (lstatSync(own, { throwIfNoEntry: false })?.isSymbolicLink())
    throw new TandemError(
      'BAD_DATA',
      `image folder ${path.resolve(dir)}: its cache directory ${own} is a symbolic link (to ${readlinkSync(own)}): ` +
        'tandem would write its cache where the link leads; remove the link, or give a cache directory with ' +
        '--data-cache DIR',
    );
  return own;
}

/** An image folder's or a CSV's spec and dataset; `regression`: a CSV's labels are float targets. */
export async function prepareFileData(checked: CheckedConfig, regression: boolean): Promise<PreparedData> {
  const { config, dataSource } = checked;
  if (isCsvFile(dataSource)) {
    const file = path.resolve(dataSource);
    const data: DatasetSpec = {
      source: file,
      options: { seed: checked.fields.seed },
      file: {
        kind: 'csv',
        file,
        labelColumn: config.labelColumn ?? '',
        ...(config.featureColumns ? { featureColumns: config.featureColumns } : {}),
        label: regression ? 'target' : 'class',
        stamp: csvStamp(file),
      },
    };
    return preparedFrom(data, await resolveDataset(data));
  }
  const dir = path.resolve(dataSource);
  const [h, w, c] = checked.imageShape ?? checked.builtinModel?.preferredInputShape ?? DEFAULT_FOLDER_SHAPE;
  const imageShape: [number, number, number] = [h, w, c];
  const cacheDir = folderCacheDir(dir, config.dataCache);
  const { stamp, notes } = await prepareImageFolder(dir, imageShape, cacheDir);
  const data: DatasetSpec = {
    source: dir,
    options: { seed: checked.fields.seed },
    file: { kind: 'image-folder', dir, imageShape, cacheDir, stamp },
  };
  return { ...preparedFrom(data, await resolveDataset(data)), ...(notes.length > 0 ? { dataWarnings: notes } : {}) };
}

function preparedFrom(data: DatasetSpec, ds: Dataset): PreparedData {
  return {
    data,
    meta: { size: ds.size, sampleShape: ds.sampleShape, classes: ds.classes },
    firstLabel: probeFirstSample(ds, data.source),
    userDataset: ds,
    ...(ds.classNames ? { classNames: ds.classNames } : {}),
  };
}
