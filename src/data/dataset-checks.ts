/**
 * A data module's dataset, checked where it is built (on the main thread
 * before any device thread, and again in each loader): an object with a
 * positive size, a sample shape of positive integers, at least one class and
 * a `read` function. Each failure is BAD_DATA naming the module and what was
 * expected against what was found.
 */
import { TandemError } from '../errors.js';
import { sampleSize, type Dataset } from './dataset.js';
import { SampleReader } from './one-sample-view.js';
import { sourcePath } from '../source-path.js';
import { found, nonNumberLabelProblem } from './returned-value.js';
import { checkedClassLabel } from './class-labels.js';

const EXPECTED = 'a Dataset { size, sampleShape, classes, read(index, out, offset) → label }';

export function checkedDataset(ds: unknown, file: string): Dataset {
  const bad = (what: string, expected: string, value: unknown): never => {
    throw new TandemError('BAD_DATA', `data module ${file}: ${what}: expected ${expected}, found ${found(value)}`);
  };
  if (ds === null || typeof ds !== 'object') bad('its factory returned no dataset', EXPECTED, ds);
  const d = ds as Partial<Dataset>;
  if (!Number.isInteger(d.size) || (d.size as number) < 1)
    bad('size', 'an integer >= 1 (the number of samples)', d.size);
  if (
    !Array.isArray(d.sampleShape) ||
    d.sampleShape.length === 0 ||
    d.sampleShape.some(n => !Number.isInteger(n) || n < 1)
  ) {
    bad('sampleShape', 'a non-empty list of positive integers, e.g. [28, 28, 1]', d.sampleShape);
  }
  if (!Number.isInteger(d.classes) || (d.classes as number) < 1)
    bad('classes', 'an integer >= 1 (labels are 0 … classes-1; 1 for regression)', d.classes);
  if (typeof d.read !== 'function') bad('read', 'a function read(index, out, offset) → label', d.read);
  if (d.label !== undefined && typeof d.label !== 'function')
    bad('label', 'a function label(index), or no label at all', d.label);
  const names = d.classNames;
  if (
    names !== undefined &&
    (!Array.isArray(names) || names.length !== d.classes || names.some(n => typeof n !== 'string'))
  )
    bad('classNames', `a list of ${String(d.classes)} strings (one name per class, in label order), or none`, names);
  if (d.targetShape !== undefined) {
    if (!Array.isArray(d.targetShape) || d.targetShape.some(n => !Number.isInteger(n) || n < 1))
      bad('targetShape', 'a list of positive integers (the shape of one target), or no targetShape', d.targetShape);
    if (typeof d.readTarget !== 'function')
      bad('readTarget', 'a function readTarget(index, out, offset), as a dataset with a targetShape has', d.readTarget);
  }
  return d as Dataset;
}

/**
 * Reads sample 0 as a loader would, on this thread: a read that throws, writes past its sample or returns no number is
 * named before any thread starts. Returns its label (or target).
 */
export function probeFirstSample(ds: Dataset, source: string): number | undefined {
  const reader = new SampleReader(ds, source);
  if (ds.targetShape) {
    reader.read(0, new Float32Array(reader.sampleFloats), 0);
    const target = new Float32Array(sampleSize(ds.targetShape));
    readTargetInto(ds, 0, target, 0, source);
    return undefined;
  }
  const label = reader.read(0, new Float32Array(reader.sampleFloats), 0);
  if (typeof label !== 'number' || !Number.isFinite(label)) {
    const why = nonNumberLabelProblem(label);
    throw new TandemError(
      'BAD_DATA',
      `dataset ${sourcePath(source)}: read(0, out, offset) returned ${found(label)}; expected the sample's label ` +
        `(an integer in [0, ${ds.classes})) or, for a regression, its target (a finite number)${why ? `; ${why}` : ''}`,
    );
  }
  checkLabelAgrees(ds, 0, label, source);
  return label;
}

/**
 * Sample `index`'s target into out[at, at + targetShape's size): written and finite, else BAD_DATA naming the sample
 * (a dataset with a `targetShape`).
 */
export function readTargetInto(ds: Dataset, index: number, out: Float32Array, at: number, source: string): void {
  const size = sampleSize(ds.targetShape!);
  const view = out.subarray(at, at + size);
  view.fill(NaN);
  ds.readTarget!(index, view, 0);
  const k = view.findIndex(v => !Number.isFinite(v));
  if (k >= 0)
    throw new TandemError(
      'BAD_DATA',
      `dataset ${sourcePath(source)}: sample ${index}'s target has ${view[k]} at element ${k}: readTarget ` +
        `must ` +
        `write all ${size} values of targetShape [${ds.targetShape!.join(', ')}], each finite`,
    );
}

/**
 * The held-out samples [from, to) the evaluation reads after training, read and checked now (label a class, every input
 * written and finite), before any thread: no loader reads them, and a bad one found after training would fail the run
 * with its model unwritten.
 */
export function probeHeldOut(ds: Dataset, from: number, to: number, source: string): void {
  const reader = new SampleReader(ds, source);
  const out = new Float32Array(reader.sampleFloats);
  for (let i = from; i < to; i++) checkedClassLabel(reader.read(i, out, 0), ds.classes, sourcePath(source), i);
}

/**
 * A dataset's optional `label(index)` must give the label `read(index, …)` returns: method local-head partitions the
 * samples by `label()` without reading them, so one that disagrees would have devices train samples of labels they do
 * not own, or the wrong samples. Checked on sample 0 before any thread and on every sample a loader reads.
 */
export function checkLabelAgrees(ds: Dataset, index: number, read: number, source: string): void {
  if (!ds.label) return;
  const given = ds.label(index);
  if (given === read) return;
  throw new TandemError(
    'BAD_DATA',
    `dataset ${sourcePath(source)}: label(${index}) returned ${found(given)}, ` +
      (`but read(${index}, out, offset) returned ${found(read)}; label(index) must return the label read returns for ` +
        `the same sample `) +
      ('(method local-head assigns samples to devices by label() without reading them); fix label(), or leave it out ' +
        'and tandem reads the samples'),
  );
}

const FLAGS = { classes: '--classes', datasetSize: '--dataset-size', imageSize: '--image-size' } as const;

/**
 * What the run asked a data module's factory for (`--classes`, `--dataset-size`, `--image-size`) against the dataset it
 * returned: a factory that ignores an option would train on other data than the flag says, silently. BAD_CONFIG naming
 * the option, both values and the way out. `imageSize` is compared as given (2 values: height and width).
 */
export function checkOptionsHonoured(
  ds: Dataset,
  asked: { classes?: number; datasetSize?: number; imageSize?: number[] },
  file: string,
): void {
  const refuse = (option: keyof typeof FLAGS, field: string, given: string, got: string): never => {
    throw new TandemError(
      'BAD_CONFIG',
      `${FLAGS[option]} ${given} (config.${option}) was given, but data module ${file} returned a dataset with ` +
        `${field} ${got}: ` +
        (`its factory does not use options.${field === 'sampleShape' ? 'imageShape' : field}. Leave ${FLAGS[option]} ` +
          `out (the dataset gives its own), `) +
        'or have the factory build what it is asked for',
    );
  };
  if (asked.classes !== undefined && asked.classes !== ds.classes)
    refuse('classes', 'classes', String(asked.classes), String(ds.classes));
  if (asked.datasetSize !== undefined && asked.datasetSize !== ds.size)
    refuse('datasetSize', 'size', String(asked.datasetSize), String(ds.size));
  const image = asked.imageSize;
  if (image !== undefined && (ds.sampleShape.length < image.length || image.some((n, i) => n !== ds.sampleShape[i]))) {
    refuse('imageSize', 'sampleShape', `[${image.join(', ')}]`, `[${ds.sampleShape.join(', ')}]`);
  }
}
