/** Builds a dataset from its spec: a builtin name or a module path. Same code on every thread. */
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { TandemError } from '../errors.js';
import type { DataModuleOptions, Dataset, DatasetFactory, DatasetSpec } from './dataset.js';
import { loadMnist } from './mnist.js';
import { syntheticImages } from './synthetic-images.js';
import { defaultExportProblem, importUserModule, userModuleErrorCode } from './import-user-module.js';
import { checkedDataset } from './dataset-checks.js';
import type { FileDataSpec } from './file-data-spec.js';
import { openImageFolder } from './image-folder.js';
import { readCsv } from './csv-dataset.js';
import { isTfDataset, streamedModuleDataset } from './tfdata-source.js';
import { isMainThread } from 'node:worker_threads';

export const BUILTIN_DATASETS = ['mnist', 'synthetic-images'] as const;

export function isModulePath(source: string): boolean {
  return (
    source.startsWith('.') || source.startsWith('/') || source.startsWith('file:') || /\.(m?js|cjs|json)$/.test(source)
  );
}

/** Whether `source` names a directory: an image folder (image-files.ts). */
export function isImageFolder(source: string): boolean {
  return (
    !source.startsWith('file:') && statSync(path.resolve(source), { throwIfNoEntry: false })?.isDirectory() === true
  );
}

/** Whether `source` names a .csv file (csv-dataset.ts). */
export function isCsvFile(source: string): boolean {
  return !source.startsWith('file:') && ['.csv', '.tsv'].includes(path.extname(source).toLowerCase());
}

/**
 * UNKNOWN_DATASET for a `config.data` that is no builtin, module, folder or CSV file: a name with a path separator or
 * an extension (`imgs/`, `train.jsonl`) is a path that is not there, and is named as one.
 */
export function unknownDataset(source: string): TandemError {
  const builtins = BUILTIN_DATASETS.join(', ');
  const there = statSync(path.resolve(source), { throwIfNoEntry: false });
  if (there?.isFile())
    return new TandemError(
      'UNKNOWN_DATASET',
      `config.data: ${source} (${path.resolve(source)}) is a ${path.extname(source) || 'file without an extension'} ` +
        `file, which tandem does not read as data; give an image folder, a .csv file or an ES module (.mjs, .js: ` +
        `a data module of yours can read this file), or a builtin: ${builtins}`,
    );
  if (/[\\/]/.test(source) || path.extname(source) !== '')
    return new TandemError(
      'UNKNOWN_DATASET',
      `config.data: no such folder or file: ${source} (${path.resolve(source)}); give an image folder, a .csv ` +
        `file or an ES module, or a builtin: ${builtins}`,
    );
  return new TandemError(
    'UNKNOWN_DATASET',
    `config.data: unknown dataset '${source}'. Builtins: ${builtins}; or a path to an ES module, an image folder or ` +
      'a .csv file.',
  );
}

/** Absolute file URL of a user module, or a clear error if it is not there. */
export function resolveModuleUrl(source: string, what: 'model' | 'data' | 'plugins'): string {
  if (source.startsWith('file:')) return source;
  const file = path.resolve(source);
  if (!existsSync(file)) {
    throw new TandemError(
      'MODULE_NOT_FOUND',
      what === 'plugins'
        ? `--plugin ${source}: no such file (${file}). Give the path of an ES module that registers a transport, ` +
            `method or engine ` +
            ('(a plugin is loaded from its file: there are no builtin plugin names, and a package is given by its ' +
              'file path)')
        : `--${what} ${source}: no such file (${file}). Give a builtin name or a path to an ES module whose default ` +
            `export is the ${what} factory.`,
    );
  }
  return pathToFileURL(file).href;
}

export async function loadDefaultExport<T>(url: string, what: 'model' | 'data'): Promise<T> {
  const mod = await importUserModule(url, what);
  const problem = defaultExportProblem(mod);
  if (problem) {
    throw new TandemError(
      userModuleErrorCode(what),
      `${what} module ${fileURLToPath(url)}: expected a default export function (export default (…) => …), found ` +
        `${problem}`,
    );
  }
  return mod.default as T;
}

const cache = new Map<string, Promise<Dataset>>();

export function resolveDataset(spec: DatasetSpec): Promise<Dataset> {
  const key = JSON.stringify(spec);
  let ds = cache.get(key);
  if (!ds) {
    ds = build(spec);
    cache.set(key, ds);
  }
  return ds;
}

async function build(spec: DatasetSpec): Promise<Dataset> {
  if (spec.file) return openFileData(spec.file);
  switch (spec.source) {
    case 'mnist':
      return loadMnist();
    case 'synthetic-images':
      return syntheticImages(spec.options);
    default: {
      if (!isModulePath(spec.source)) throw unknownDataset(spec.source);
      const url = resolveModuleUrl(spec.source, 'data');
      refuseNonModule(url);
      const factory = await loadDefaultExport<DatasetFactory>(url, 'data');
      const value = await callDataFactory(factory, spec, url);
      // a tf.data.Dataset: streamed through a ring (tfdata-source.ts); each run on the main thread builds its own
      if (isTfDataset(value)) {
        if (isMainThread) cache.delete(JSON.stringify(spec));
        return streamedModuleDataset(value, spec, fileURLToPath(url));
      }
      return checkedDataset(value, fileURLToPath(url));
    }
  }
}

async function openFileData(spec: FileDataSpec): Promise<Dataset> {
  switch (spec.kind) {
    case 'image-folder':
      return openImageFolder(spec);
    case 'csv':
      return readCsv(spec);
    default: {
      const never: never = spec;
      throw new Error(`unknown data file ${JSON.stringify(never)}`);
    }
  }
}

/** What a dataset is, for a --data that is no ES module. */
const DATA_MODULE =
  'a dataset is an ES module (.mjs, or .js) whose default export is ({ seed, classes, imageShape, size, batch, ' +
  'hostRank, hosts }) => ' +
  'Dataset { size, sampleShape, classes, read(index, out, offset) → label }, or a tf.data.Dataset of batches ' +
  '(docs/guide/data.md)';

/**
 * A directory or a file Node does not import as a module (a model.json, a .csv, …): BAD_DATA saying what a dataset is,
 * instead of Node's import error.
 */
function refuseNonModule(url: string): void {
  const file = fileURLToPath(url);
  if (statSync(file, { throwIfNoEntry: false })?.isDirectory()) {
    throw new TandemError('BAD_DATA', `--data ${file} is a directory; ${DATA_MODULE}`);
  }
  const ext = path.extname(file).toLowerCase();
  if (ext !== '' && !['.js', '.mjs', '.cjs'].includes(ext)) {
    const hint =
      ext === '.json'
        ? ' A model.json goes to --model; data in a JSON file is read by a data module of yours (e.g. with ' +
          'readFileSync in its factory).'
        : '';
    throw new TandemError(
      'BAD_DATA',
      `--data ${file} is a ${ext} file, not an ES module tandem can import; ${DATA_MODULE}.${hint}`,
    );
  }
}

async function callDataFactory(factory: DatasetFactory, spec: DatasetSpec, url: string): Promise<unknown> {
  try {
    // prepare-data.ts gives a module's factory the run's batch, hostRank and hosts
    return await factory(spec.options as DataModuleOptions);
  } catch (err) {
    if (err instanceof TandemError) throw err;
    throw new TandemError(
      'BAD_DATA',
      `data module ${fileURLToPath(url)}: its factory threw ` +
        `${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`,
      undefined,
      { cause: err },
    );
  }
}
