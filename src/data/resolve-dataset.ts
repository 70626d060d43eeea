/** Builds a dataset from its spec: a builtin name or a module path. Same code on every thread. */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { TandemError } from '../errors.js';
import type { Dataset, DatasetFactory, DatasetSpec } from './dataset.js';
import { loadMnist } from './mnist.js';
import { syntheticImages } from './synthetic-images.js';

export const BUILTIN_DATASETS = ['mnist', 'synthetic-images'] as const;

export function isModulePath(source: string): boolean {
  return source.startsWith('.') || source.startsWith('/') || source.startsWith('file:') || /\.(m?js|cjs|json)$/.test(source);
}

/** Absolute file URL of a user module, or a clear error if it is not there. */
export function resolveModuleUrl(source: string, what: 'model' | 'data' | 'plugins'): string {
  if (source.startsWith('file:')) return source;
  const file = path.resolve(source);
  if (!existsSync(file)) {
    throw new TandemError('MODULE_NOT_FOUND', `--${what} ${source}: no such file (${file}). ` +
      `Give a builtin name or a path to an ES module whose default export is the ${what} factory.`);
  }
  return pathToFileURL(file).href;
}

export async function loadDefaultExport<T>(url: string, what: string): Promise<T> {
  const mod = (await import(url)) as { default?: unknown };
  if (typeof mod.default !== 'function') {
    throw new TandemError('BAD_CONFIG', `${what} module ${url} has no default export function; export default (…) => …`);
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
  switch (spec.source) {
    case 'mnist': return loadMnist();
    case 'synthetic-images': return syntheticImages(spec.options);
    default: {
      if (!isModulePath(spec.source)) {
        throw new TandemError('UNKNOWN_DATASET', `unknown dataset '${spec.source}'. Builtins: ${BUILTIN_DATASETS.join(', ')}; or give a path to an ES module.`);
      }
      const factory = await loadDefaultExport<DatasetFactory>(resolveModuleUrl(spec.source, 'data'), 'data');
      return factory(spec.options);
    }
  }
}
