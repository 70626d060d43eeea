/** The model and the data a config names: builtins by name, else module paths (found, not imported). */
import { TandemError } from '../errors.js';
import { bad } from '../config-checks.js';
import type { TrainConfig } from '../config-types.js';
import { BUILTIN_MODELS, type BuiltinModel } from '../model/builtin-models.js';
import { modelPathUrl } from '../model/model-path.js';
import {
  BUILTIN_DATASETS,
  isCsvFile,
  isImageFolder,
  isModulePath,
  resolveModuleUrl,
  unknownDataset,
} from '../data/resolve-dataset.js';

export function modelSourceOf(config: TrainConfig): {
  modelSource: string;
  builtinModel?: BuiltinModel;
  modelUrl?: string;
} {
  const modelSource = config.model ?? 'mlp';
  const builtinModel = BUILTIN_MODELS[modelSource];
  const modelUrl = builtinModel ? undefined : modelPathUrl(modelSource);
  if (!builtinModel && !modelUrl) {
    throw new TandemError(
      'UNKNOWN_MODEL',
      `config.model: unknown model '${modelSource}'. Builtins: ${Object.keys(BUILTIN_MODELS).join(', ')}; ` +
        'or a path to an ES module or a TensorFlow.js layers model.json.',
    );
  }
  return { modelSource, builtinModel, modelUrl };
}

/** The data source, and imageSize as [height, width, channels]; what a builtin dataset cannot take is refused. */
export function dataSourceOf(config: TrainConfig): { dataSource: string; imageShape?: number[] } {
  const dataSource = config.data ?? 'mnist';
  const folder = isImageFolder(dataSource);
  const csv = !folder && isCsvFile(dataSource);
  if (!(BUILTIN_DATASETS as readonly string[]).includes(dataSource) && !folder && !csv) {
    if (!isModulePath(dataSource)) throw unknownDataset(dataSource);
    resolveModuleUrl(dataSource, 'data');
  }
  const s = config.imageSize;
  const imageShape = s === undefined ? undefined : s.length === 2 ? [s[0], s[1], 3] : [...s];
  if (dataSource === 'mnist') {
    if (config.classes !== undefined && config.classes !== 10) bad('classes', 'mnist has 10 classes');
    if (imageShape) bad('imageSize', 'mnist images are 28x28x1; imageSize applies to synthetic-images');
  }
  checkCsvOptions(config, dataSource, csv);
  refuseOwnSamples(config, dataSource, dataSource === 'mnist' || folder || csv, csv);
  if (config.dataCache !== undefined && !folder)
    bad('dataCache', `is where an image folder's decoded images go; data '${dataSource}' is no image folder`);
  return { dataSource, ...(imageShape ? { imageShape } : {}) };
}

/**
 * mnist, an image folder and a CSV have their own samples: a size (or a CSV's classes or image shape) given for them
 * would be ignored unsaid. synthetic-images builds what it is asked; a data module is told and checked.
 */
function refuseOwnSamples(config: TrainConfig, dataSource: string, own: boolean, csv: boolean): void {
  const theirs = `data '${dataSource}' has its own samples`;
  if (own && config.datasetSize !== undefined)
    bad('datasetSize', `applies to synthetic-images and data modules; ${theirs}: remove datasetSize`);
  if (csv && config.classes !== undefined)
    bad('classes', `applies to synthetic-images and data modules; ${theirs} (its label column): remove classes`);
  if (csv && config.imageSize !== undefined)
    bad('imageSize', `applies to images; ${theirs} (its feature columns): remove imageSize`);
}

/** A CSV needs its label column; the CSV options apply to a CSV alone. */
function checkCsvOptions(config: TrainConfig, dataSource: string, csv: boolean): void {
  if (csv && config.labelColumn === undefined)
    bad('labelColumn', `--data ${dataSource} is a CSV: name its label column (--label-column NAME)`);
  for (const key of ['labelColumn', 'featureColumns'] as const)
    if (!csv && config[key] !== undefined)
      bad(key, `applies to --data FILE.csv (or .tsv); data '${dataSource}' is no CSV`);
}
