/**
 * How many cores a run keeps busy in its steady state: the process's CPU time
 * (every thread: compute, comm, loader, main, V8's helpers) over the wall time
 * of a window that every training of the process is inside — from the moment
 * the last of them passed its warm-up step to the moment the first of them
 * reached its end step. The scaling bench shows it for (c) and (d): a machine
 * that (d) keeps busy and (c) leaves idle at moments is what (c)/(d) loses.
 *
 * @example
 * const window = new SteadyCpuWindow(2, 10, 79);
 * train(a, { onStep: m => window.onStep(0, m.step) }); train(b, { onStep: m => window.onStep(1, m.step) });
 * window.coresBusy() // 1.97
 */

export interface CpuReading {
  wallMs: number;
  cpuMs: number;
}

/** This process's CPU time so far (user + system, every thread) and the wall clock, in ms. */
export function readProcessCpu(): CpuReading {
  const u = process.cpuUsage();
  return { wallMs: performance.now(), cpuMs: (u.user + u.system) / 1000 };
}

export class SteadyCpuWindow {
  private readonly passed = new Set<number>();
  private start?: CpuReading;
  private end?: CpuReading;

  /**
   * `trainings` concurrent trainings; the window opens once each has finished step `from`, closes when one finishes
   * step `to`.
   */
  constructor(
    private readonly trainings: number,
    private readonly from: number,
    private readonly to: number,
    private readonly read: () => CpuReading = readProcessCpu,
  ) {}

  /** Training `training` finished step `step` (its onStep). */
  onStep(training: number, step: number): void {
    if (step >= this.from) this.passed.add(training);
    if (!this.start && this.passed.size === this.trainings) this.start = this.read();
    if (this.start && !this.end && step >= this.to) this.end = this.read();
  }

  /** CPU time over wall time inside the window; undefined when it never opened and closed, or is empty. */
  coresBusy(): number | undefined {
    if (!this.start || !this.end || this.end.wallMs <= this.start.wallMs) return undefined;
    return (this.end.cpuMs - this.start.cpuMs) / (this.end.wallMs - this.start.wallMs);
  }
}
