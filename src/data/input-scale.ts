/**
 * A hint, not a check: image inputs on a 0–255 scale (a data module that
 * returns raw pixel bytes as floats) train, but usually diverge or crawl at
 * learning rates meant for inputs of about [0, 1]. The first batch's first
 * samples are read on the main thread before any thread starts; when image
 * inputs reach far past the usual range, the run says so once, as a warning
 * (the scale can be intended), naming the data module and the fix.
 *
 * The rule: image-shaped samples (sampleShape of 2 or more dimensions) whose
 * largest |x| exceeds 10. The usual scalings stay well inside it: [0, 1],
 * [-1, 1], and per-channel standardisation (ImageNet's mean and std give at
 * most about 2.6; MNIST's whole-image mean and std 2.8), so 10 leaves room
 * for a few-sigma outlier, while raw bytes reach 255 on any image that is not
 * nearly black. Samples of one dimension (tabular features) are left alone:
 * their scales vary by design, and dividing by 255 is no fix for them.
 */
import { sampleSize, type Dataset } from './dataset.js';
import { sourcePath } from '../source-path.js';

/** The largest |input| of a normalised image, with room for outliers (see above). */
export const IMAGE_INPUT_LIMIT = 10;
/**
 * How many samples of the first batch are read for the hint: enough to see past a black image, few enough to be quick.
 */
export const SCALE_PROBE_SAMPLES = 64;

/**
 * The warning for `indices` (the first batch's first samples) of data module `source`, or undefined when its inputs
 * look normalised or are not image-shaped. A read that throws or returns garbage is skipped here: the loaders report
 * it.
 */
export function inputScaleWarning(ds: Dataset, indices: ArrayLike<number>, source: string): string | undefined {
  if (ds.sampleShape.length < 2) return undefined;
  const out = new Float32Array(sampleSize(ds.sampleShape));
  let largest = 0;
  let at = -1;
  const n = Math.min(indices.length, SCALE_PROBE_SAMPLES);
  for (let k = 0; k < n; k++) {
    out.fill(0);
    try {
      ds.read(indices[k], out, 0);
    } catch {
      continue;
    }
    for (let i = 0; i < out.length; i++) {
      const v = Math.abs(out[i]);
      if (v > largest) {
        largest = v;
        at = indices[k];
      } // NaN compares false: the loaders name it
    }
  }
  if (largest <= IMAGE_INPUT_LIMIT) return undefined;
  const bytes = largest <= 255 ? ' (a 0–255 scale: raw pixel bytes?)' : '';
  return (
    `data module ${sourcePath(source)}: image inputs reach ${largest} (sample ${at}, of the ${n} first-batch ` +
    `samples read)${bytes}; ` +
    `images usually train on about [0, 1] (or standardised), and at this scale training usually diverges or crawls: ` +
    `divide by 255 in read (out[i] = byte / 255), or standardise; if the scale is intended, ignore this warning`
  );
}
