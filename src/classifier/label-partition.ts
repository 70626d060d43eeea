/**
 * Which device owns which class labels (method B, seed 002). By default the C
 * classes are cut into N contiguous shares whose sizes differ by at most one;
 * a user may give their own partition (a list of label lists, one per device).
 * Every class is owned exactly once; each device maps its labels to local
 * indices 0..C_d-1 in the order it lists them.
 */
import { TandemError } from '../errors.js';

export class LabelPartition {
  /** owner[label] = device. */
  readonly owner: Int32Array;
  /** localIndex[label] = index of the label on its device. */
  readonly localIndex: Int32Array;
  /** labels[d] = the global labels device d owns, in local order. */
  readonly labels: Int32Array[];

  private constructor(
    readonly classes: number,
    labels: Int32Array[],
  ) {
    this.labels = labels;
    this.owner = new Int32Array(classes).fill(-1);
    this.localIndex = new Int32Array(classes).fill(-1);
    labels.forEach((ls, d) =>
      ls.forEach((label, i) => {
        this.owner[label] = d;
        this.localIndex[label] = i;
      }),
    );
  }

  get devices(): number {
    return this.labels.length;
  }

  /** Number of labels device d owns. */
  size(device: number): number {
    return this.labels[device].length;
  }

  /** Contiguous shares of sizes floor(C/N) or ceil(C/N), the larger first. */
  static contiguous(classes: number, devices: number): LabelPartition {
    if (!Number.isInteger(classes) || classes < 1)
      throw new TandemError('BAD_CONFIG', `classes must be a positive integer, got ${classes}`);
    if (!Number.isInteger(devices) || devices < 1)
      throw new TandemError('BAD_CONFIG', `devices must be a positive integer, got ${devices}`);
    if (classes < devices) {
      throw new TandemError(
        'BAD_CONFIG',
        `cannot share ${classes} classes among ${devices} devices: every device needs at least one label. ` +
          `Use at most ${classes} devices or more classes.`,
      );
    }
    const base = Math.floor(classes / devices),
      extra = classes % devices;
    const labels: Int32Array[] = [];
    let next = 0;
    for (let d = 0; d < devices; d++) {
      const n = base + (d < extra ? 1 : 0);
      const ls = new Int32Array(n);
      for (let i = 0; i < n; i++) ls[i] = next++;
      labels.push(ls);
    }
    return new LabelPartition(classes, labels);
  }

  /** A user's partition: `shares[d]` lists device d's labels. Checked: disjoint, complete, none empty. */
  static fromShares(classes: number, shares: readonly (readonly number[])[]): LabelPartition {
    if (!Array.isArray(shares) || shares.length === 0)
      throw new TandemError('BAD_CONFIG', 'partition: give one list of labels per device');
    const seen = new Int32Array(classes).fill(-1);
    shares.forEach((share, d) => {
      if (!Array.isArray(share) || share.length === 0)
        throw new TandemError('BAD_CONFIG', `partition: device ${d} owns no labels; every device needs at least one`);
      for (const label of share) {
        if (!Number.isInteger(label) || label < 0 || label >= classes)
          throw new TandemError('BAD_CONFIG', `partition: device ${d} lists label ${label}, outside [0, ${classes})`);
        if (seen[label] !== -1)
          throw new TandemError(
            'BAD_CONFIG',
            `partition: label ${label} is owned by device ${seen[label]} and device ${d}; every class must be owned ` +
              `exactly once`,
          );
        seen[label] = d;
      }
    });
    const missing = seen.indexOf(-1);
    if (missing !== -1)
      throw new TandemError(
        'BAD_CONFIG',
        `partition: label ${missing} is owned by no device; every class must be owned exactly once`,
      );
    return new LabelPartition(
      classes,
      shares.map(s => Int32Array.from(s)),
    );
  }
}
