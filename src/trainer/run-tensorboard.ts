/**
 * TensorBoard event files of a run (`tensorboard: DIR`), laid out as tfjs-node's `tf.node.tensorBoard` writes a fit's:
 * `DIR/train`, `batch_loss`/`batch_acc` per step and `epoch_loss`/`epoch_acc` per epoch (and `epoch_learning_rate`, as
 * Keras's TensorBoard callback writes it), with tandem's own per step:
 * `samples_per_second`, `step_ms`, `learning_rate` (the step's, scheduled or not), `compute_ms/device_<d>`,
 * `exchange_ms/device_<d>` and `exchange_bytes/device_<d>` (the bytes the device handed to the exchange) for every
 * device of the world on host 0, `overlap_share` (the share of the step's exchange
 * time that ran while the same device's backward did, as the timeline picture counts it: `overlapShare`). With epoch
 * logs (`--validation-split`), each epoch's `val_<name>` goes to `DIR/val` as `epoch_<name>`, as tfjs-node writes a
 * fit's validation.
 */
import path from 'node:path';
import { EventFileWriter } from '../monitor/tensorboard-writer.js';
import type { ScalarValue } from '../monitor/tfevents.js';
import type { RunEvent } from '../monitor/run-event.js';
import type { Span } from '../monitor/span.js';
import { overlapShare } from '../monitor/timeline-picture.js';
import type { StepMetrics, TrainHooks } from './run-types.js';
import { teeHooks } from './hook-tee.js';

/** The scalars of one step of a run. */
export function stepScalars(m: StepMetrics): ScalarValue[] {
  return [
    { tag: 'batch_loss', value: m.loss },
    { tag: 'batch_acc', value: m.accuracy },
    { tag: 'samples_per_second', value: m.samplesPerSecond },
    { tag: 'step_ms', value: m.stepMs },
    { tag: 'learning_rate', value: m.lr },
    { tag: 'data_wait_ms', value: m.dataWaitMs },
    ...m.computeMs.map((value, d) => ({ tag: `compute_ms/device_${d}`, value })),
  ];
}

/**
 * Feeds a run's step metrics, spans and events to `DIR/train`; epoch means when an epoch's last step is done. A step
 * is written once the metrics of the step two after it arrive (or at the close), so that its exchange spans are in:
 * they come from the comm threads beside the step and, when the exchange overlaps backward (two-group, per-layer,
 * buckets), can arrive after the next step's metrics, never after the one after (that step's forward waited for this
 * step's update). `exchange_ms/device_<d>`: the device's exchange spans of the step summed.
 */
const HELD_STEPS = 2;

export class RunTensorBoard {
  private readonly writer: EventFileWriter;
  /** DIR/val, opened at the first epoch with validation logs. */
  private valWriter?: EventFileWriter;
  private stepsPerEpoch = 0;
  private epochLoss = 0;
  private epochAcc = 0;
  private epochSteps = 0;
  /** Steps whose metrics arrived, not yet written. */
  private readonly held: StepMetrics[] = [];
  /** Per step not yet written: its exchange and backward spans. */
  private readonly spans = new Map<number, Span[]>();

  constructor(
    private readonly dir: string,
    private readonly warn: (message: string) => void,
  ) {
    this.writer = new EventFileWriter(path.join(dir, 'train'), { warn });
  }

  get file(): string {
    return this.writer.file;
  }

  event(e: RunEvent): void {
    if (e.type === 'started') {
      this.stepsPerEpoch = e.stepsPerEpoch;
      if (e.firstStep > 1) this.writer.sessionStart(e.firstStep); // --resume: the later points of before go
    }
    if (e.type === 'epochEnd') this.validation(e.epoch, e.logs);
  }

  /** An epoch's `val_<name>` logs, as `epoch_<name>` in DIR/val (tfjs-node's layout). */
  private validation(epoch: number, logs: Record<string, number>): void {
    const scalars = Object.entries(logs)
      .filter(([key]) => key.startsWith('val_'))
      .map(([key, value]) => ({ tag: `epoch_${key.slice('val_'.length)}`, value }));
    if (scalars.length === 0) return;
    this.valWriter ??= new EventFileWriter(path.join(this.dir, 'val'), { warn: this.warn });
    this.valWriter.scalars(epoch, scalars);
    void this.valWriter.flush();
  }

  span(s: Span): void {
    if (s.kind !== 'exchange' && s.kind !== 'backward') return;
    const step = this.spans.get(s.step);
    if (step) step.push(s);
    else this.spans.set(s.step, [s]);
  }

  step(m: StepMetrics): void {
    this.held.push(m);
    while (this.held.length > HELD_STEPS) this.write(this.held.shift()!);
  }

  async close(): Promise<void> {
    for (const m of this.held.splice(0)) this.write(m);
    await Promise.all([this.writer.close(), this.valWriter?.close()]);
  }

  private write(m: StepMetrics): void {
    const spans = this.spans.get(m.step) ?? [];
    for (const step of this.spans.keys()) if (step <= m.step) this.spans.delete(step);
    const exchange: number[] = [];
    const bytes: number[] = [];
    for (const s of spans) {
      if (s.kind !== 'exchange') continue;
      exchange[s.device] = (exchange[s.device] ?? 0) + (s.end - s.start);
      bytes[s.device] = (bytes[s.device] ?? 0) + (s.bytes ?? 0);
    }
    this.writer.scalars(m.step, [
      ...stepScalars(m),
      ...Array.from(exchange, (value, d) => ({ tag: `exchange_ms/device_${d}`, value: value ?? 0 })),
      ...Array.from(bytes, (value, d) => ({ tag: `exchange_bytes/device_${d}`, value: value ?? 0 })),
      ...(exchange.length > 0 ? [{ tag: 'overlap_share', value: overlapShare(spans) }] : []),
    ]);
    this.epochLoss += m.loss;
    this.epochAcc += m.accuracy;
    this.epochSteps++;
    if (this.stepsPerEpoch > 0 && m.step % this.stepsPerEpoch === 0) {
      // An epoch this run saw only the end of (--resume from a checkpoint inside it): its first steps' values are the
      // run's before, not here, so no mean of it is written (the one before, if it got there, stands).
      if (this.epochSteps === this.stepsPerEpoch) this.epochPoint(m);
      this.epochLoss = this.epochAcc = this.epochSteps = 0;
      void this.writer.flush(); // at an epoch's end, as tfjs-node's writer
    }
  }

  private epochPoint(m: StepMetrics): void {
    this.writer.scalars(m.step / this.stepsPerEpoch, [
      { tag: 'epoch_loss', value: this.epochLoss / this.epochSteps },
      { tag: 'epoch_acc', value: this.epochAcc / this.epochSteps },
      { tag: 'epoch_learning_rate', value: m.lr }, // as Keras's TensorBoard callback: the epoch's last lr
    ]);
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
    hooks: teeHooks(hooks, {
      step: m => {
        lastStep = m.step;
        board.step(m);
      },
      spans: spans => spans.forEach(sp => board.span(sp)),
      event: e => board.event(e),
    }),
    close: () => board.close(),
  };
}
