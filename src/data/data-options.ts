/** The data section of a train config: the dataset, its shape, and the samples held out. */
import type { OptionTable } from '../options/declaration.js';
import { intUpTo, nonEmpty, positiveInt, trueOrFalse } from '../options/option-checks.js';
import { bad } from '../config-checks.js';

export interface DataOptions {
  /**
   * Builtin dataset name, path to an ES module `(options) => Dataset`, an image folder (one subfolder per class) or a
   * .csv file. Default `mnist`.
   */
  data?: string;
  classes?: number;
  /** [height, width] or [height, width, channels] of synthetic images. */
  imageSize?: number[];
  /** Samples in a synthetic dataset. */
  datasetSize?: number;
  /** Samples held out at the end of the dataset for evaluation. Default 10% for the classifier methods, else 0. */
  heldOut?: number;
  /** Held-out samples evaluated after training (the first of the held-out range). Default 2000. */
  evalSamples?: number;
  loaderThreads?: number;
  /** A CSV's label column (its header's name). */
  labelColumn?: string;
  /** A CSV's feature columns, in this order (each entry may hold several, comma-separated). Default every other. */
  featureColumns?: string[];
  /** An image folder's cache directory (decoded images). Default DIR/.tandem-cache. */
  dataCache?: string;
  /**
   * Each epoch visits the training samples in a seeded random order. Default true; false: in their order (index 0
   * first), as tfjs's `model.fit` with `shuffle: false`.
   */
  shuffle?: boolean;
  /**
   * Each epoch ends with its last, smaller batch (the samples left after the full batches), split over the devices
   * as evenly as it can be, as tfjs's `model.fit` trains it. Default false: the samples left over are not trained.
   */
  partialBatch?: boolean;
}

function imageSize(s: unknown, field: string): number[] {
  if (!Array.isArray(s) || (s.length !== 2 && s.length !== 3) || s.some(v => !Number.isInteger(v) || v < 1))
    bad(field, 'must be [height, width] or [height, width, channels] of positive integers');
  return s as number[];
}

function columnNames(v: unknown, field: string): string[] {
  if (!Array.isArray(v) || v.length === 0 || v.some(n => typeof n !== 'string' || n === ''))
    bad(field, 'must be a list of column names (--feature-columns A,B)');
  return v as string[];
}

export const DATA_OPTIONS: OptionTable<DataOptions> = {
  data: {
    kind: 'string',
    group: 'model and data',
    hosts: "own: a path may differ between machines; the samples' shape, classes and count are compared",
    arg: 'NAME|PATH',
    default: 'mnist',
    doc: 'mnist, synthetic-images, an ES module (options) => Dataset, an image folder (DIR/CLASS/*.png) or a .csv/.tsv',
    check: nonEmpty('must be a builtin name or a module path'),
  },
  classes: {
    kind: 'integer',
    group: 'model and data',
    hosts: 'same',
    arg: 'C',
    doc: 'classes of a synthetic or module dataset',
    check: positiveInt(10_000_000),
  },
  imageSize: {
    kind: 'shape',
    group: 'model and data',
    hosts: 'same',
    arg: 'HxW[xC]',
    doc:
      "synthetic-images, an image folder: the image shape (folder: resized to it; default the model's, else " +
      '64x64x3)',
    check: imageSize,
  },
  datasetSize: {
    kind: 'integer',
    group: 'model and data',
    hosts: 'same',
    doc: 'samples in a synthetic dataset',
    check: positiveInt(),
  },
  heldOut: {
    kind: 'integer',
    group: 'model and data',
    hosts: 'same',
    default: '10% for local-head and partial-fc, else 0',
    doc: 'samples held out at the end of the dataset for evaluation',
  },
  evalSamples: {
    kind: 'integer',
    group: 'model and data',
    hosts: 'same',
    default: '2000 (at most the held-out samples)',
    doc: 'held-out samples evaluated after training',
    check: positiveInt(),
  },
  loaderThreads: {
    kind: 'config',
    type: 'integer',
    group: 'model and data',
    hosts: "own: this machine's cores; every host loads the same batches",
    default: 'min(2, cores - 1); 0 where the process has one core',
    doc: 'threads that load the batches (0: the main thread loads them)',
    check: intUpTo(16, '0: the main thread loads'),
  },
  labelColumn: {
    kind: 'string',
    group: 'model and data',
    hosts: 'same',
    arg: 'NAME',
    doc: '--data FILE.csv: the column of the labels (classes, or a regression target)',
    check: nonEmpty('must be a column name of the CSV header'),
  },
  featureColumns: {
    kind: 'list',
    group: 'model and data',
    hosts: 'same',
    arg: 'A,B,…',
    default: 'every column but the label',
    doc: '--data FILE.csv: the feature columns, in this order',
    check: columnNames,
  },
  dataCache: {
    kind: 'string',
    group: 'model and data',
    hosts: 'own: a directory on this machine',
    arg: 'DIR',
    default: 'DIR/.tandem-cache (in the image folder)',
    doc: "an image folder's cache of decoded images (rebuilt when a file changes)",
    check: nonEmpty('must be a directory path'),
  },
  shuffle: {
    kind: 'negated',
    group: 'model and data',
    hosts: 'same',
    default: 'true',
    doc: 'each epoch visits the samples in a seeded random order (off: in their order, index 0 first)',
    check: trueOrFalse,
  },
  partialBatch: {
    kind: 'boolean',
    group: 'model and data',
    hosts: 'same',
    default: 'false',
    doc:
      "each epoch also trains its last, smaller batch (as tfjs's model.fit), split unevenly over the devices; a " +
      'batch larger than the training samples is then one batch of them all, and a batch that is no multiple of ' +
      'the devices is split as evenly as it can be',
    check: trueOrFalse,
  },
};

/**
 * `loaderThreads` when not given: up to 2, one core left to the compute; none on a process of one core, whose
 * batches the main thread loads (a loader thread there is woken on the same core for every batch).
 */
export function defaultLoaderThreads(cores: number): number {
  return cores <= 1 ? 0 : Math.min(2, cores - 1);
}
