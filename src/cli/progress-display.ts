/**
 * What `tandem train` shows while it runs: on a TTY a progress bar per epoch
 * (loss, accuracy, samples/s, and the share of exchange time hidden under
 * backward); otherwise plain lines about every 5% of an epoch (CI logs);
 * `--json`: one JSON object per line; `--quiet`: nothing but the end.
 * Several hosts: host 0 shows the world (its run's hooks see every host's
 * metrics and warnings), lines carry `host` in JSON; a host other than 0
 * shows only warnings (and, in JSON, its failure) unless `verbose`.
 */
import type { StepMetrics } from '../trainer/train.js';
import type { RunEvent } from '../monitor/run-event.js';
import type { Span } from '../monitor/span.js';
import { overlapShare } from '../monitor/timeline-picture.js';

export class ProgressDisplay {
  private epoch = 1;
  private epochStart = 1;
  private stepsPerEpoch = 1;
  /** The run has a learning-rate schedule: the step lines show each step's lr. */
  private scheduled = false;
  private epochs = 1;
  /** The current epoch's steps so far: their loss and accuracy summed, when its first step ended. */
  private tally = { steps: 0, loss: 0, accuracy: 0, since: 0 };
  private recent: Span[] = [];

  /** host: this process's host rank, when the run has several hosts. */
  constructor(
    private readonly mode: { json: boolean; quiet: boolean; tty: boolean; host?: number; verbose?: boolean },
  ) {}

  /** A host other than 0, not verbose: warnings and errors only. */
  private get muted(): boolean {
    return (this.mode.host ?? 0) > 0 && this.mode.verbose !== true;
  }

  event(e: RunEvent): void {
    if (this.muted && e.type !== 'warning' && e.type !== 'failed') return;
    if (this.mode.json) {
      console.log(
        JSON.stringify({
          event: e.type,
          ...e,
          ...(this.mode.host === undefined ? {} : { host: e.host ?? this.mode.host }),
        }),
      );
      return;
    }
    if (e.type === 'dashboard') return console.log(`dashboard: ${e.url}`); // asked for: shown even with --quiet
    if (this.mode.quiet) return;
    switch (e.type) {
      case 'started':
        return this.started(e);
      case 'auto':
        console.log(
          `auto: picked ${e.strategy}${e.splitLayer ? ` (p = ${e.splitLayer} layers with parameters)` : ''}: ` +
            `${e.reason}`,
        );
        return;
      case 'ready':
        return;
      case 'epoch':
        if (e.epoch > 1) this.endBar();
        this.epochLine();
        this.epoch = e.epoch;
        this.epochStart = e.step;
        return;
      case 'epochEnd':
        this.endBar();
        return this.epochLine(e.logs);
      case 'checkpoint':
        this.line(`checkpoint: ${e.path}`);
        return;
      case 'warning': {
        const host = e.host !== undefined && e.host !== this.mode.host ? ` (host ${e.host})` : '';
        this.line(`warning${host}${e.step > 0 ? ` at step ${e.step}` : ''}: ${e.message}`); // step 0: before training
        return;
      }
      case 'stopped':
        this.epochLine();
        this.line(`stopped after step ${e.step}`);
        return;
      case 'finished':
        this.endBar();
        this.epochLine();
        return;
      case 'failed':
        return; // the command prints the error itself
      default: {
        const never: never = e;
        void never;
      }
    }
  }

  private started(e: Extract<RunEvent, { type: 'started' }>): void {
    console.log(
      `training on ${e.devices} device(s), ${e.backend}${e.precision === 'fp32' ? '' : ` ${e.precision}`}, ` +
        `${e.method}, strategy ${e.strategy}, steps ` +
        `${e.firstStep}..${e.steps}`,
    );
    this.stepsPerEpoch = e.stepsPerEpoch;
    this.scheduled = e.lrSchedule !== undefined;
    this.epochs = Math.ceil(e.steps / e.stepsPerEpoch);
  }

  spans(spans: Span[]): void {
    this.recent.push(...spans);
    if (this.recent.length > 4000) this.recent = this.recent.slice(-2000);
  }

  step(m: StepMetrics): void {
    if (this.muted) return;
    if (this.mode.json) {
      console.log(JSON.stringify({ event: 'step', ...m }));
      return;
    }
    if (this.mode.quiet) return;
    this.count(m);
    const inEpoch = m.step - this.epochStart + 1;
    const overlap = overlapShare(this.recent.filter(s => s.step === m.step - 1));
    const acc = Number.isNaN(m.accuracy) ? '' : `  acc ${(m.accuracy * 100).toFixed(1)}%`; // regression has no accuracy
    const lr = this.scheduled ? `  lr ${m.lr.toPrecision(3)}` : '';
    const text =
      `loss ${m.loss.toFixed(4)}${acc}${lr}  ${m.samplesPerSecond.toFixed(0)} samples/s  overlap ` +
      `${(overlap * 100).toFixed(0)}%`;
    this.recent = this.recent.filter(s => s.step >= m.step - 1);
    if (this.mode.tty) {
      const width = 24,
        done = Math.min(width, Math.round((inEpoch / this.stepsPerEpoch) * width));
      process.stdout.write(
        `\repoch ${this.epoch} [${'#'.repeat(done)}${'.'.repeat(width - done)}] step ${m.step}  ${text}   `,
      );
    } else if (m.step === 1 || m.step % Math.max(1, Math.floor(this.stepsPerEpoch / 20)) === 0) {
      console.log(`epoch ${this.epoch} step ${m.step}  ${text}`);
    }
  }

  private count(m: StepMetrics): void {
    const t = this.tally;
    // the epoch's time from its first step's start: that step's period before it was recorded
    if (t.steps === 0) t.since = performance.now() - m.stepMs;
    t.steps++;
    t.loss += m.loss;
    t.accuracy += m.accuracy;
  }

  /**
   * The epoch's line once its steps are over, e.g. `epoch 3/10  loss 0.3100  acc 0.912  12.3 s`: the means over its
   * steps (as tfjs's epoch logs); regression has no accuracy. With the run's epoch logs (`logs`: validation, early
   * stopping): their values, e.g. `epoch 3/10  loss 0.3100  acc 0.912  val_loss 0.3500  val_acc 0.901  12.3 s`.
   */
  private epochLine(logs?: Record<string, number>): void {
    const t = this.tally;
    if (t.steps === 0 || this.mode.json || this.mode.quiet || this.muted) return;
    const values = logs ?? {
      loss: t.loss / t.steps,
      ...(Number.isNaN(t.accuracy) ? {} : { acc: t.accuracy / t.steps }),
    };
    const seconds = ((performance.now() - t.since) / 1000).toFixed(1);
    console.log(`epoch ${this.epoch}/${this.epochs}  ${epochValues(values)}  ${seconds} s`);
    this.tally = { steps: 0, loss: 0, accuracy: 0, since: 0 };
  }

  /** On a TTY, the progress bar's line ended (once: not after an epoch line already printed). */
  private endBar(): void {
    if (this.mode.tty && this.tally.steps > 0) process.stdout.write('\n');
  }

  private line(text: string): void {
    if (this.mode.tty) process.stdout.write(`\n${text}\n`);
    else console.log(text);
  }
}

/** `loss 0.3100  acc 0.912  val_loss 0.3500  val_acc 0.901`: losses to 4 decimals, accuracies to 3, others 4 digits. */
export function epochValues(logs: Record<string, number>): string {
  const shown = (key: string, v: number) =>
    /(^|_)loss$/.test(key) ? v.toFixed(4) : /(^|_)acc$/.test(key) ? v.toFixed(3) : v.toPrecision(4);
  return Object.entries(logs)
    .map(([key, v]) => `${key} ${shown(key, v)}`)
    .join('  ');
}
