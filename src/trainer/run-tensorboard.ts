/**
 * TensorBoard event files of a run (`tensorboard: DIR`), laid out as tfjs-node's `tf.node.tensorBoard` writes a fit's:
 * `DIR/train`, `batch_loss`/`batch_acc` per step and `epoch_loss`/`epoch_acc` per epoch, with tandem's own per step:
 * `samples_per_second`, `step_ms`, `learning_rate` (the step's, scheduled or not), `compute_ms/device_<d>`,
 * `exchange_ms/device_<d>` (every device of the world on host 0).
 */
import path from 'node:path';
import { EventFileWriter } from '../monitor/tensorboard-writer.js';
import type { ScalarValue } from '../monitor/tfevents.js';
import type { RunEvent } from '../monitor/run-event.js';
import type { Span } from '../monitor/span.js';
import type { StepMetrics, TrainHooks } from './run-types.js';

/** The scalars of one step of a run. */
export function stepScalars(m: StepMetrics): ScalarValue[] {
  return [
    { tag: 'batch_loss', value: m.loss },
    { tag: 'batch_acc', value: m.accuracy },
    { tag: 'samples_per_second', value: m.samplesPerSecond },
    { tag: 'step_ms', value: m.stepMs },
    { tag: 'learning_rate', value: m.lr },
    ...m.computeMs.map((value, d) => ({ tag: `compute_ms/device_${d}`, value })),
  ];
}

/**
 * Feeds a run's step metrics, spans and events to `DIR/train`; epoch means when an epoch's last step is done. A step
 * is written when the next one's metrics arrive (or at the close), so that its exchange spans, reported beside the
 * step, are in: `exchange_ms/device_<d>`, the device's exchange spans of the step summed.
 */
export class RunTensorBoard {
  private readonly writer: EventFileWriter;
  private stepsPerEpoch = 0;
  private epochLoss = 0;
  private epochAcc = 0;
  private epochSteps = 0;
  private held: StepMetrics | undefined;
  private readonly exchangeMs = new Map<number, number[]>();

  constructor(dir: string, warn: (message: string) => void) {
    this.writer = new EventFileWriter(path.join(dir, 'train'), { warn });
  }

  get file(): string {
    return this.writer.file;
  }

  event(e: RunEvent): void {
    if (e.type === 'started') this.stepsPerEpoch = e.stepsPerEpoch;
  }

  span(s: Span): void {
    if (s.kind !== 'exchange') return;
    const perDevice = this.exchangeMs.get(s.step) ?? [];
    perDevice[s.device] = (perDevice[s.device] ?? 0) + (s.end - s.start);
    this.exchangeMs.set(s.step, perDevice);
  }

  step(m: StepMetrics): void {
    if (this.held) this.write(this.held);
    this.held = m;
  }

  async close(): Promise<void> {
    if (this.held) this.write(this.held);
    this.held = undefined;
    await this.writer.close();
  }

  private write(m: StepMetrics): void {
    const exchange = this.exchangeMs.get(m.step) ?? [];
    for (const step of this.exchangeMs.keys()) if (step <= m.step) this.exchangeMs.delete(step);
    this.writer.scalars(m.step, [
      ...stepScalars(m),
      ...Array.from(exchange, (value, d) => ({ tag: `exchange_ms/device_${d}`, value: value ?? 0 })),
    ]);
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
      onSpans: spans => {
        for (const sp of spans) board.span(sp);
        hooks.onSpans?.(spans);
      },
      onEvent: e => {
        board.event(e);
        hooks.onEvent?.(e);
      },
    },
    close: () => board.close(),
  };
}
