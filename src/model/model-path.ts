/**
 * A user's `--model PATH` as the URL every thread loads: a TensorFlow.js
 * model.json or an ES module. A directory holding a model.json (what
 * `--out DIR` writes, or a tfjs `save('file://DIR')`) stands for that file;
 * anything else on disk that is neither is refused naming what to give.
 */
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { TandemError } from '../errors.js';
import { KERAS_CONVERSION } from './layers-model-files.js';
import { isModulePath, resolveModuleUrl } from '../data/resolve-dataset.js';

const MODEL_FILE = /\.(m?js|cjs|json)$/;

/**
 * The model's file URL; undefined when `source` is no path (not path-like, and nothing of that name on disk): an
 * unknown name.
 */
export function modelPathUrl(source: string): string | undefined {
  if (source.startsWith('file:')) return source;
  const file = path.resolve(source);
  // the former throws MODULE_NOT_FOUND
  if (!existsSync(file)) return isModulePath(source) ? resolveModuleUrl(source, 'model') : undefined;
  if (statSync(file).isDirectory()) {
    const json = path.join(file, 'model.json');
    if (existsSync(json) && statSync(json).isFile()) return pathToFileURL(json).href;
    throw new TandemError(
      'BAD_MODEL',
      `--model ${source}: ${file} is a directory with no model.json in it; give a TensorFlow.js layers model.json ` +
        ('(or the directory holding it, as --out writes) or an ES module whose default export is (tf, options) => ' +
          'tf.LayersModel'),
    );
  }
  if (!MODEL_FILE.test(file)) {
    throw new TandemError(
      'BAD_MODEL',
      `--model ${source}: ${file} is neither a TensorFlow.js layers model.json nor an ES module (.js, .mjs)` +
        (file.endsWith('.bin')
          ? '; it looks like a weights file: give the model.json beside it'
          : /\.(h5|hdf5|keras)$/i.test(file)
            ? `; it looks like a Keras model: convert it (${KERAS_CONVERSION}) and give out_dir/model.json`
            : ''),
    );
  }
  return pathToFileURL(file).href;
}
