/**
 * Early stopping on the epoch logs, as tfjs's `tf.callbacks.earlyStopping({ monitor, patience })` decides it (minDelta
 * 0, no baseline, mode `auto`: higher is better when the monitor's name has `acc` in it, else lower): the best value
 * so far, the epochs since it improved; the run stops once they reach `patience`.
 */
export class EpochStopping {
  private best: number;
  private wait = 0;
  /** The epoch of the best value (1 first); 0: none yet. */
  bestEpoch = 0;
  readonly higherIsBetter: boolean;

  constructor(
    readonly monitor: string,
    readonly patience: number,
  ) {
    this.higherIsBetter = monitor.includes('acc');
    this.best = this.higherIsBetter ? -Infinity : Infinity;
  }

  get bestValue(): number {
    return this.best;
  }

  /** The epoch's logs seen; true: stop after it. */
  stopsAfter(epoch: number, logs: Record<string, number>): boolean {
    const current = logs[this.monitor];
    if (current === undefined) return false;
    if (this.higherIsBetter ? current > this.best : current < this.best) {
      this.best = current;
      this.bestEpoch = epoch;
      this.wait = 0;
      return false;
    }
    this.wait++;
    return this.wait >= this.patience;
  }
}
