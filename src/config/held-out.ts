/** The samples held out for evaluation, and the way out of a batch larger than the training samples. */
import { bad } from '../config-checks.js';
import { positiveInt } from '../options/option-checks.js';

/**
 * The held-out samples to evaluate: `given` (config.evalSamples) if the held-out range has that many, else refused
 * before training (it evaluated the `heldOut` there were, or nothing, without a word); the default, 2000, is capped
 * at `heldOut` silently. `heldOutDefault`: heldOut was not given (the method's default).
 */
export function evalSamplesOf(given: unknown, heldOut: number, heldOutDefault: boolean): number {
  if (given === undefined) return 2000;
  const n = positiveInt()(given, 'evalSamples');
  const source = heldOutDefault ? `the method's default heldOut is ${heldOut}` : `heldOut is ${heldOut}`;
  if (heldOut === 0) {
    bad(
      'evalSamples',
      `evaluates ${n} held-out samples, but none are held out (${source}): hold out samples for it with heldOut ${n} ` +
        `(--held-out ${n}: the last ${n} samples, which then are not trained on), or leave evalSamples out`,
    );
  }
  if (n > heldOut) {
    bad(
      'evalSamples',
      `${n} is more than the ${heldOut} held-out samples (${source}): give evalSamples ${heldOut} or fewer ` +
        `(--eval-samples ${heldOut}), or hold out more with heldOut ${n} (--held-out ${n})`,
    );
  }
  return n;
}

/** The way out of a batch larger than the `trainSize` training samples, over `devices` devices. */
export function smallerBatch(trainSize: number, devices: number, heldOut: number): string {
  const fewer = heldOut > 0 ? ', or hold out fewer (--held-out)' : '';
  if (trainSize < devices)
    return `every device needs at least one sample per step: use more data, or fewer than ${devices} devices${fewer}`;
  return (
    `give a batch of at most ${trainSize - (trainSize % devices)} (a multiple of the ${devices} ` +
    `device(s))${fewer}, or use more data`
  );
}
