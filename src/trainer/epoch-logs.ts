/**
 * A run's epoch logs (config.epochLogs), as tfjs's `model.fit` logs its epochs: at each epoch's end, `loss`, `acc` and
 * the metrics over the epoch's batches (the batches' values weighted by their samples), and with a validation split
 * `val_loss`, `val_acc`, `val_<metric>` of the weights trained so far (epoch-validation.ts); sent as an `epochEnd`
 * event, kept for the summary (`epochs`), and read by early stopping (epoch-stopping.ts) and the best epochs kept
 * (best-epochs.ts). Several hosts: every host adds up every host's sums, so all see the same logs and stop together.
 */
import type { ResolvedConfig } from '../config-types.js';
import { metricValues } from '../model/metric-values.js';
import { EpochValidation, type ValidationSums } from './epoch-validation.js';
import { EpochStopping } from './epoch-stopping.js';
import { BestEpochs, type KeptEpoch } from './best-epochs.js';
import type { EpochEnd, HostStepShare, TrainHooks } from './run-types.js';

/** One epoch's logs: its number (1 first) and tfjs's keys. */
export type EpochRecord = { epoch: number } & Record<string, number>;

/** Where early stopping ended the run: the epoch, and the best epoch of the monitored log. */
export interface EarlyStop {
  epoch: number;
  monitor: string;
  bestEpoch: number;
  best: number;
}

/** A step's sums on this host: samples, the loss times them, the correct ones, the metrics' two sums each. */
type StepSums = number[];

/** What a host brings to an epoch's end. */
interface HostPart {
  steps: StepSums[];
  validation?: ValidationSums;
}

export class EpochLogs {
  readonly hooks: TrainHooks;
  readonly history: EpochRecord[] = [];
  earlyStop?: EarlyStop;
  private steps: StepSums[] = [];
  private readonly validation?: EpochValidation;
  private readonly stopping?: EpochStopping;
  /** Host 0, with keepBest: the best epochs' models. */
  private readonly best?: BestEpochs;

  constructor(
    private readonly cfg: ResolvedConfig,
    private readonly inner: TrainHooks,
  ) {
    const logs = cfg.epochLogs!;
    if (logs.validation) this.validation = new EpochValidation(cfg);
    if (logs.keepBest && cfg.topology.process === 0)
      this.best = new BestEpochs(cfg, logs.keepBest.keep, logs.keepBest.monitor);
    if (logs.earlyStopping) this.stopping = new EpochStopping(logs.earlyStopping.monitor, logs.earlyStopping.patience);
    this.hooks = {
      ...inner,
      onHostStep: share => {
        this.steps.push(stepSums(share));
        inner.onHostStep?.(share);
      },
      atEpochEnd: async end => {
        const stop = await this.epochEnded(end);
        const innerStop = (await inner.atEpochEnd?.(end)) === true;
        return stop || innerStop;
      },
    };
  }

  private async epochEnded(end: EpochEnd): Promise<boolean> {
    const steps = this.steps;
    this.steps = [];
    let validation: ValidationSums | undefined;
    if (this.validation) {
      const { weights, nonTrainableWeights } = await end.weights();
      const copy = (ws: { values: Float32Array }[]) => ws.map(w => Float32Array.from(w.values));
      validation = await this.validation.sums(copy(weights), copy(nonTrainableWeights));
    }
    const mine: HostPart = { steps, ...(validation ? { validation } : {}) };
    const parts = end.hosts ? await end.hosts.gather<HostPart>('epoch-logs', mine) : [mine];
    const logs = epochLogsOf(parts, this.cfg.metrics ?? []);
    this.history.push({ epoch: end.epoch, ...logs });
    this.inner.onEvent?.({ type: 'epochEnd', epoch: end.epoch, step: end.step, logs });
    await this.best?.epochEnded(end, logs);
    const stop = this.stopping?.stopsAfter(end.epoch, logs) === true;
    if (stop) {
      const { monitor, bestEpoch, bestValue } = this.stopping!;
      this.earlyStop = { epoch: end.epoch, monitor, bestEpoch, best: bestValue };
    }
    return stop;
  }

  /** What the summary keeps: the epochs' logs, and where early stopping ended the run. */
  summary(): { epochs: EpochRecord[]; earlyStop?: EarlyStop; bestEpochs?: KeptEpoch[] } {
    return {
      epochs: this.history,
      ...(this.earlyStop ? { earlyStop: this.earlyStop } : {}),
      ...(this.best ? { bestEpochs: [...this.best.kept] } : {}),
    };
  }

  async close(): Promise<void> {
    this.best?.close();
    await this.validation?.close();
  }
}

function stepSums(share: HostStepShare): StepSums {
  return [share.samples, share.loss * share.samples, share.correct, ...(share.metricSums ?? [])];
}

/** Elementwise sum of `rows` (each `length` long, a missing value 0). */
function added(rows: number[][], length: number): number[] {
  return Array.from({ length }, (_, i) => rows.reduce((s, r) => s + (r[i] ?? 0), 0));
}

/** The epoch's logs from every host's parts: each batch's world values, then their mean weighted by its samples. */
export function epochLogsOf(parts: HostPart[], metrics: readonly string[]): Record<string, number> {
  const width = 3 + 2 * metrics.length;
  const batches = Math.max(...parts.map(p => p.steps.length));
  const totals = new Array<number>(2 + metrics.length).fill(0);
  let samples = 0;
  for (let b = 0; b < batches; b++) {
    const [n, loss, correct, ...sums] = added(
      parts.map(p => p.steps[b] ?? []),
      width,
    );
    const values = metricValues(sums);
    totals[0] += loss;
    totals[1] += correct;
    values.forEach((v, i) => (totals[2 + i] += v * n));
    samples += n;
  }
  const logs: Record<string, number> = { loss: totals[0] / samples };
  if (Number.isFinite(totals[1])) logs.acc = totals[1] / samples;
  metrics.forEach((m, i) => (logs[m] = totals[2 + i] / samples));
  const val = parts.filter(p => p.validation).map(p => p.validation!);
  if (val.length === 0) return logs;
  const n = val.reduce((s, p) => s + p.samples, 0);
  logs.val_loss = val.reduce((s, p) => s + p.loss, 0) / n;
  const correct = val.reduce((s, p) => s + p.correct, 0);
  if (Number.isFinite(correct)) logs.val_acc = correct / n;
  const sums = added(
    val.map(p => p.metricSums),
    2 * metrics.length,
  );
  metricValues(sums).forEach((value, i) => (logs[`val_${metrics[i]}`] = value));
  return logs;
}
