/**
 * tfjs's fit loop over one tandem run: onTrainBegin, per epoch onEpochBegin, the batches (onBatchBegin / onBatchEnd
 * as each step's metrics arrive), the trained weights into the model, validation, onEpochEnd; onTrainEnd. The device
 * threads start once per fit: the run trains every epoch, and at each epoch's end (`atEpochEnd`, the devices idle)
 * the callbacks run and decide, through `model.stopTraining`, whether it goes on.
 */
import type * as tf from '@tensorflow/tfjs';
import { train } from '../trainer/train.js';
import type { TrainConfig } from '../config-types.js';
import type { EpochEnd, StepMetrics, TrainHooks } from '../trainer/run-types.js';
import { fitCallbackList, type FitParams } from './fit-callbacks.js';
import { loadTrainedWeights } from './trained-weights.js';
import type { FitTargets } from './fit-targets.js';
import type { FitArgs } from './fit-args.js';

export interface FitPlan {
  model: tf.LayersModel;
  targets: FitTargets;
  config: TrainConfig;
  stepsPerEpoch: number;
  batchSize: number;
  /** The samples of each batch of an epoch, in order (the last may be fewer). */
  batchSizes: number[];
}

/** How the caller's loop differs: fit's or fitDataset's (their params, their batch logs, their validation). */
export interface FitStyle {
  callbacks: FitArgs['callbacks'];
  yieldEvery: FitArgs['yieldEvery'];
  epochs: number;
  initialEpoch: number;
  verbose: number;
  /** The params' samples, steps, batchSize and initialEpoch as the tfjs method sets them. */
  params: Pick<FitParams, 'samples' | 'steps' | 'batchSize' | 'initialEpoch'>;
  /** fitDataset fills batch and size before onBatchBegin; fit after. */
  batchLogsBeforeBegin: boolean;
  /** The epoch's `val_` logs, on the weights trained so far. */
  validate?: () => Promise<Record<string, number>>;
  /** The model the devices build, when not the caller's: its flat-input wrapper, sharing its variables. */
  trained?: tf.LayersModel;
}

/** The fit's epochs, from `s.initialEpoch`, in one run; its History. */
export async function fitLoop(plan: FitPlan, s: FitStyle): Promise<tf.History> {
  const { model, targets } = plan;
  const outLabels = ['loss', ...targets.metricKeys];
  const metrics = s.validate ? [...outLabels, ...outLabels.map(l => `val_${l}`)] : outLabels;
  const { list, history } = fitCallbackList(model, s.callbacks, s.yieldEvery ?? 'auto', {
    ...s.params,
    epochs: s.epochs,
    verbose: s.verbose,
    doValidation: s.validate !== undefined,
    metrics,
  });
  model.history = history;
  await list.onTrainBegin();
  model.stopTraining = false;
  if (s.initialEpoch < s.epochs) {
    await list.onEpochBegin(s.initialEpoch);
    const batches = new BatchCallbacks(list, plan, s.batchLogsBeforeBegin);
    const hooks: TrainHooks = {
      onStep: m => batches.stepDone(m),
      atEpochEnd: end => epochEnded(plan, s, list, batches, end),
      // `dashboard` asked for a page: its address (fit has no event stream to give it on)
      onEvent: e => (e.type === 'dashboard' ? console.log(`dashboard: ${e.url}`) : undefined),
    };
    const run = await train({ ...plan.config, steps: (s.epochs - s.initialEpoch) * plan.stepsPerEpoch }, hooks);
    loadTrainedWeights(model, run);
  }
  await list.onTrainEnd();
  await history.syncData();
  return history;
}

/** At an epoch's end: its batch callbacks done, the weights in the model, validation, onEpochEnd; true: stop. */
async function epochEnded(
  plan: FitPlan,
  s: FitStyle,
  list: tf.CallbackList,
  batches: BatchCallbacks,
  end: EpochEnd,
): Promise<boolean> {
  const { model } = plan;
  const epoch = s.initialEpoch + end.epoch - 1;
  const batchLogs = await batches.epochLogs();
  loadTrainedWeights(model, await end.weights());
  const epochLogs: Record<string, number> = s.validate ? await s.validate() : {};
  Object.assign(epochLogs, batchLogs);
  await list.onEpochEnd(epoch, epochLogs);
  if (model.stopTraining || epoch + 1 >= s.epochs) return true;
  await list.onEpochBegin(epoch + 1);
  return false;
}

/**
 * onBatchBegin / onBatchEnd with tfjs's batch logs ({ batch, size, loss, acc }), in order, as each step's metrics
 * arrive (chained: a callback's promise is awaited before the next batch's); the epoch's training logs, the means over
 * its batches weighted by their samples, once its batches' callbacks are done.
 */
class BatchCallbacks {
  private chain: Promise<void> = Promise.resolve();
  private failure: unknown;
  private totals: Record<string, number> = {};
  private seen = 0;
  /** The epoch's last step's learning rate. */
  private lr: number | undefined;

  constructor(
    private readonly list: tf.CallbackList,
    private readonly plan: FitPlan,
    private readonly logsBeforeBegin: boolean,
  ) {}

  stepDone(m: StepMetrics): void {
    this.chain = this.chain.then(() => this.batch(m)).catch(err => void (this.failure ??= err));
  }

  private async batch(m: StepMetrics): Promise<void> {
    if (this.failure !== undefined) return;
    this.lr = m.lr;
    const { metricKeys } = this.plan.targets;
    const batch = (m.step - 1) % this.plan.stepsPerEpoch;
    const size = this.plan.batchSizes[batch];
    const logs: Record<string, number> = {};
    const counts = () => Object.assign(logs, { batch, size });
    if (this.logsBeforeBegin) counts();
    await this.list.onBatchBegin(batch, logs);
    if (!this.logsBeforeBegin) counts(); // model.fit fills them after onBatchBegin
    logs.loss = m.loss;
    for (const [i, key] of metricKeys.entries()) logs[key] = m.metrics?.[i] ?? m.accuracy;
    await this.list.onBatchEnd(batch, logs);
    for (const key of ['loss', ...metricKeys]) this.totals[key] = (this.totals[key] ?? 0) + logs[key] * size;
    this.seen += size;
  }

  /** The epoch's means, once its batches' callbacks ran (a callback's failure thrown here); reset for the next. */
  async epochLogs(): Promise<Record<string, number>> {
    await this.chain;
    if (this.failure !== undefined) throw this.failure;
    const logs = Object.fromEntries(Object.entries(this.totals).map(([k, v]) => [k, v / this.seen]));
    if (this.plan.config.lrSchedule !== undefined && this.lr !== undefined) logs.lr = this.lr; // as fit's logs show it
    this.totals = {};
    this.seen = 0;
    return logs;
  }
}
