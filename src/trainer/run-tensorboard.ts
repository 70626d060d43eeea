/**
 * TensorBoard event files of a run (`tensorboard: DIR`), laid out as tfjs-node's `tf.node.tensorBoard` writes a fit's:
 * `DIR/train`, `batch_loss`/`batch_acc` per step and `epoch_loss`/`epoch_acc` per epoch, with tandem's own per step:
 * `samples_per_second`, `step_ms`, `compute_ms/device_<d>` (every device of the world on host 0).
 */
import path from 'node:path';
import { EventFileWriter } from '../monitor/tensorboard-writer.js';
import type { ScalarValue } from '../monitor/tfevents.js';
import type { RunEvent } from '../monitor/run-event.js';
import type { StepMetrics, TrainHooks } from './run-types.js';

/** The scalars of one step of a run. */
export function stepScalars(m: StepMetrics): ScalarValue[] {
  return [
    { tag: 'batch_loss', value: m.loss },
    { tag: 'batch_acc', value: m.accuracy },
    { tag: 'samples_per_second', value: m.samplesPerSecond },
    { tag: 'step_ms', value: m.stepMs },
    ...m.computeMs.map((value, d) => ({ tag: `compute_ms/device_${d}`, value })),
  ];
}

/** Feeds a run's step metrics and events to `DIR/train`; epoch means when an epoch's last step is done. */
export class RunTensorBoard {
  private readonly writer: EventFileWriter;
  private stepsPerEpoch = 0;
  private epochLoss = 0;
  private epochAcc = 0;
  private epochSteps = 0;

  constructor(dir: string, warn: (message: string) => void) {
    this.writer = new EventFileWriter(path.join(dir, 'train'), { warn });
  }

  get file(): string {
    return this.writer.file;
  }

  event(e: RunEvent): void {
    if (e.type === 'started') this.stepsPerEpoch = e.stepsPerEpoch;
  }

  step(m: StepMetrics): void {
    this.writer.scalars(m.step, stepScalars(m));
    this.epochLoss += m.loss;
    this.epochAcc += m.accuracy;
    this.epochSteps++;
    if (this.stepsPerEpoch > 0 && m.step % this.stepsPerEpoch === 0) {
      this.writer.scalars(m.step / this.stepsPerEpoch, [
        { tag: 'epoch_loss', value: this.epochLoss / this.epochSteps },
        { tag: 'epoch_acc', value: this.epochAcc / this.epochSteps },
      ]);
      this.epochLoss = this.epochAcc = this.epochSteps = 0;
      void this.writer.flush(); // at an epoch's end, as tfjs-node's writer
    }
  }

  close(): Promise<void> {
    return this.writer.close();
  }
}

/**
 * `hooks` that also feed a run's event files in `dir` (host 0's run: the caller decides), and the close that writes
 * what is left. A failed write is a `warning` event; the run goes on.
 */
export function withTensorBoard(dir: string, hooks: TrainHooks): { hooks: TrainHooks; close: () => Promise<void> } {
  let lastStep = 0;
  const board = new RunTensorBoard(dir, message => hooks.onEvent?.({ type: 'warning', step: lastStep, message }));
  return {
    hooks: {
      ...hooks,
      onStep: m => {
        lastStep = m.step;
        board.step(m);
        hooks.onStep?.(m);
      },
      onEvent: e => {
        board.event(e);
        hooks.onEvent?.(e);
      },
    },
    close: () => board.close(),
  };
}
