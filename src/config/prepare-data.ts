/**
 * The prepare phase's data part: the dataset's spec and size (a data module imported and probed), the held-out split.
 */
import { TandemError } from '../errors.js';
import { bad, shown } from '../config-checks.js';
import type { TrainConfig } from '../config-types.js';
import { isCsvFile, isImageFolder, resolveDataset, resolveModuleUrl } from '../data/resolve-dataset.js';
import { prepareFileData } from './prepare-file-data.js';
import type { PreparedData } from './prepared-data.js';
import { checkOptionsHonoured, probeFirstSample, probeHeldOut } from '../data/dataset-checks.js';
import { classLabelProblem, REGRESSION_LOSSES, singleClassProblem } from '../data/class-labels.js';
import { MNIST_META } from '../data/mnist.js';
import { streamedEpoch } from '../data/tfdata-source.js';
import { SYNTHETIC_DEFAULTS } from '../data/synthetic-images.js';
import { sourcePath } from '../source-path.js';
import type { TrainingMethod } from '../methods/training-method.js';
import type { CheckedConfig } from './checked-config.js';
import { evalSamplesOf, smallerBatch } from './held-out.js';
import { validationHeldOut } from './epoch-logs-config.js';

export type { PreparedData } from './prepared-data.js';

/** `regression`: the run's loss is a regression's (a CSV's label column then holds float targets). */
export async function prepareData(checked: CheckedConfig, regression = false): Promise<PreparedData> {
  const { config, dataSource, imageShape } = checked;
  const seed = checked.fields.seed;
  if (dataSource === 'mnist') return { data: { source: 'mnist', options: { seed } }, meta: MNIST_META };
  if (dataSource === 'synthetic-images') {
    const shape = imageShape ?? checked.builtinModel?.preferredInputShape ?? [...SYNTHETIC_DEFAULTS.imageShape];
    const classes = config.classes ?? SYNTHETIC_DEFAULTS.classes;
    const size = config.datasetSize ?? SYNTHETIC_DEFAULTS.size;
    const data = { source: dataSource, options: { seed, classes, imageShape: shape, size } };
    return { data, meta: { size, sampleShape: shape, classes } };
  }
  if (isImageFolder(dataSource) || isCsvFile(dataSource)) return prepareFileData(checked, regression);
  const data = {
    source: resolveModuleUrl(dataSource, 'data'),
    options: {
      ...{ seed, classes: config.classes, imageShape, size: config.datasetSize, batch: checked.fields.batch },
      ...{ hostRank: checked.fields.topology.process, hosts: checked.fields.topology.processes },
    },
  };
  const ds = await resolveDataset(data);
  checkOptionsHonoured(ds, config, sourcePath(data.source));
  const firstLabel = probeFirstSample(ds, data.source);
  return {
    data,
    meta: { size: ds.size, sampleShape: ds.sampleShape, classes: ds.classes, targetShape: ds.targetShape },
    firstLabel,
    userDataset: ds,
    ...(ds.classNames ? { classNames: ds.classNames } : {}),
  };
}

/** The held-out split: samples [0, trainSize) train, the evalSamples after them are evaluated. */
export function heldOutSplit(
  config: TrainConfig,
  size: number,
  method: TrainingMethod,
  batch: number,
  devices: number,
): { trainSize: number; evalSamples: number } {
  const heldOut = validationHeldOut(config, size) ?? config.heldOut ?? method.defaultHeldOut(size);
  if (!Number.isInteger(heldOut) || heldOut < 0 || heldOut >= size)
    bad('heldOut', `must be an integer in [0, ${size}), got ${shown(heldOut)}`);
  const trainSize = size - heldOut;
  const evalSamples = evalSamplesOf(config.evalSamples, heldOut, config.heldOut === undefined);
  // with partialBatch, a batch of more samples than there are is an epoch of one smaller batch, as model.fit's
  if (trainSize < batch && !(config.partialBatch === true && trainSize > 0))
    bad(
      'batch',
      `global batch ${batch} is larger than the training samples (${trainSize} of ${size}; ${heldOut} held out): ` +
        smallerBatch(trainSize, devices, heldOut),
    );
  return { trainSize, evalSamples };
}

/** A classifier's labels: two classes or more, sample 0's label one of them, the held-out range readable. */
export function checkClassLabels(
  prepared: PreparedData,
  dataSource: string,
  loss: string | undefined,
  heldOutRange: [number, number],
): void {
  const { meta, firstLabel, userDataset, data } = prepared;
  const single = singleClassProblem(meta.classes);
  if (single && dataSource === 'synthetic-images') {
    bad(
      'classes',
      'a classifier needs 2 or more classes (one-hot labels over one class train nothing), ' +
        `and data '${dataSource}' has ${meta.classes}; give --classes 2 or more`,
    );
  }
  const notAClass = single && streamedEpoch(data)?.notAClass;
  if (notAClass)
    bad(
      'loss',
      `data '${dataSource}' is a tf.data dataset whose classes are its labels 0 … the largest when every label is a ` +
        `non-negative integer, and ${notAClass}${loss ? `; loss is ${loss}` : ''}: for a classifier, map the ` +
        `labels to 0, 1, … in the pipeline; for a regression on them, give loss ${REGRESSION_LOSSES}`,
    );
  if (single && data.file?.kind === 'image-folder')
    throw new TandemError(
      'BAD_DATA',
      `--data ${dataSource}: an image folder's classes are its subfolders, and it has 1 (` +
        `${prepared.classNames?.[0] ?? ''}): a classifier of one class trains nothing; add a folder per class (2 or ` +
        'more)',
    );
  if (single) bad('loss', `data '${dataSource}' has 1 class${loss ? ` and loss is ${loss}` : ''}: ${single}`);
  const problem = firstLabel === undefined ? undefined : classLabelProblem(firstLabel, meta.classes);
  if (problem)
    throw new TandemError(
      'BAD_DATA',
      `data module ${dataSource}: read(0, out, offset) returned label ${firstLabel}, ${problem}`,
    );
  if (userDataset) probeHeldOut(userDataset, heldOutRange[0], heldOutRange[1], data.source);
}
