/**
 * tfjs's fit loop over one tandem run: onTrainBegin, per epoch onEpochBegin, the batches (onBatchBegin / onBatchEnd
 * as each step's metrics arrive), the trained weights into the model, validation, onEpochEnd; onTrainEnd. The device
 * threads start once per fit: the run trains every epoch, and at each epoch's end (`atEpochEnd`, the devices idle)
 * the callbacks run and decide, through `model.stopTraining`, whether it goes on. Several hosts (fit-hosts.ts): the
 * hosts check their arguments agree before the first step; at each epoch's end they add up their batch and validation
 * sums, so every host's callbacks see the world's logs, and stop together when any host's callbacks stop.
 */
import type * as tf from '@tensorflow/tfjs';
import { train } from '../trainer/train.js';
import type { TrainConfig } from '../config-types.js';
import type { EpochEnd, HostStepShare, RunHosts, TrainHooks } from '../trainer/run-types.js';
import { fitCallbackList, type FitParams } from './fit-callbacks.js';
import { takeOptimizerState } from './fit-optimizer-state.js';
import { loadTrainedWeights } from './trained-weights.js';
import type { FitTargets } from './fit-targets.js';
import type { FitArgs } from './fit-args.js';
import type { OutputsRun } from './fit-several-outputs.js';
import {
  agreeOnArgs,
  batchLogs,
  epochTrainLogs,
  validationLogs,
  type FitDigest,
  type HostEpoch,
  type ValidationPart,
} from './fit-hosts.js';

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
  /** Several hosts: this host's part of the validation's sums (its share of the batches), for `validate`'s logs. */
  validatePart?: (hosts: RunHosts) => Promise<ValidationPart>;
  /** The model the devices build, when not the caller's: its flat-input wrapper, sharing its variables. */
  trained?: tf.LayersModel;
  /**
   * A model of several outputs: its spec, targets and the method and plugin its devices train with (fit-outputs.ts).
   */
  outputs?: OutputsRun;
  /** Several hosts: the arguments every host must call with alike (fit-hosts.ts), compared before the first step. */
  digest?: () => FitDigest;
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
  const lrWatch = learningRateWatch(model);
  await list.onTrainBegin();
  model.stopTraining = false;
  if (s.initialEpoch < s.epochs) {
    await list.onEpochBegin(s.initialEpoch);
    lrWatch();
    const batches = new BatchCallbacks(list, plan, s.batchLogsBeforeBegin);
    const hooks: TrainHooks = {
      onHostStep: share => batches.stepDone(share),
      atHostsMet: hosts => agreeOnArgs(hosts, s.digest?.() ?? {}),
      atEpochEnd: end => epochEnded(plan, s, { list, batches, lrWatch }, end),
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
  { list, batches, lrWatch }: { list: tf.CallbackList; batches: BatchCallbacks; lrWatch: () => void },
  end: EpochEnd,
): Promise<boolean> {
  const { model } = plan;
  const epoch = s.initialEpoch + end.epoch - 1;
  const shares = await batches.epochShares();
  lrWatch(); // the epoch's batch callbacks have run
  loadTrainedWeights(model, await end.weights());
  const epochLogs = end.hosts ? await worldLogs(plan, s, end.hosts, shares) : await hostLogs(plan, s, shares);
  if (plan.config.lrSchedule !== undefined && batches.lr !== undefined) epochLogs.lr = batches.lr; // as fit's logs show
  await list.onEpochEnd(epoch, epochLogs);
  // several hosts: any host's callbacks stop every host, after the same epoch
  if (end.hosts) model.stopTraining = (await end.hosts.gather('stop', model.stopTraining)).some(Boolean);
  if (model.stopTraining || epoch + 1 >= s.epochs) {
    await takeOptimizerState(model, end.optimizerState); // model.fit's optimizer goes on from here
    return true;
  }
  await list.onEpochBegin(epoch + 1);
  lrWatch();
  return false;
}

/**
 * Warns once when a callback changes the optimizer's learning rate during fit: the devices train with the rate the
 * run started with (the next fit call takes the new one).
 */
export function learningRateWatch(model: tf.LayersModel): () => void {
  const rate = () => (model.optimizer.getConfig() as { learningRate?: unknown }).learningRate;
  const started = rate();
  let warned = false;
  return () => {
    const now = rate();
    if (warned || now === started) return;
    warned = true;
    console.warn(
      `fit: the optimizer's learning rate changed from ${String(started)} to ${String(now)} during fit (a ` +
        `callback?); the devices train with ${String(started)} to the end of this fit, and the next fit call takes ` +
        'the new rate. To change it within a fit, give the schedule as lrSchedule: (step, epoch) => rate',
    );
  };
}

const computesMetrics = (plan: FitPlan) => plan.targets.metrics !== undefined || plan.targets.metricsByMethod === true;

/** One host: validation's logs, then the means over the epoch's batches weighted by their samples. */
async function hostLogs(plan: FitPlan, s: FitStyle, shares: HostStepShare[]): Promise<Record<string, number>> {
  const logs: Record<string, number> = s.validate ? await s.validate() : {};
  return Object.assign(logs, epochTrainLogs([shares], plan.targets.metricKeys, computesMetrics(plan), plan.batchSizes));
}

/** Several hosts: the same logs from every host's shares of the batches and parts of the validation, added up. */
async function worldLogs(
  plan: FitPlan,
  s: FitStyle,
  hosts: RunHosts,
  shares: HostStepShare[],
): Promise<Record<string, number>> {
  const validation = s.validatePart ? await s.validatePart(hosts) : undefined;
  const all = await hosts.gather<HostEpoch>('logs', { shares, ...(validation ? { validation } : {}) });
  const names = plan.model.metricsNames;
  const logs: Record<string, number> = validation
    ? validationLogs(
        all.map(h => h.validation!),
        names,
      )
    : s.validate
      ? await s.validate()
      : {};
  const train = epochTrainLogs(
    all.map(h => h.shares),
    plan.targets.metricKeys,
    computesMetrics(plan),
    plan.batchSizes,
  );
  return Object.assign(logs, train);
}

/**
 * onBatchBegin / onBatchEnd with tfjs's batch logs ({ batch, size, loss, acc }), in order, as each step's share on this
 * host arrives (chained: a callback's promise is awaited before the next batch's); the epoch's shares, once its
 * batches' callbacks are done. Several hosts: a batch's logs are this host's devices' share of it.
 */
class BatchCallbacks {
  private chain: Promise<void> = Promise.resolve();
  private failure: unknown;
  private shares: HostStepShare[] = [];
  /** The epoch's last step's learning rate. */
  lr: number | undefined;

  constructor(
    private readonly list: tf.CallbackList,
    private readonly plan: FitPlan,
    private readonly logsBeforeBegin: boolean,
  ) {}

  stepDone(share: HostStepShare): void {
    this.chain = this.chain.then(() => this.batch(share)).catch(err => void (this.failure ??= err));
  }

  private async batch(share: HostStepShare): Promise<void> {
    if (this.failure !== undefined) return;
    const { plan } = this;
    this.lr = share.lr;
    const batch = (share.step - 1) % plan.stepsPerEpoch;
    const size = plan.batchSizes[batch];
    const logs: Record<string, number> = {};
    const counts = () => Object.assign(logs, { batch, size });
    if (this.logsBeforeBegin) counts();
    await this.list.onBatchBegin(batch, logs);
    if (!this.logsBeforeBegin) counts(); // model.fit fills them after onBatchBegin
    Object.assign(logs, batchLogs([share], plan.targets.metricKeys, computesMetrics(plan)));
    await this.list.onBatchEnd(batch, logs);
    this.shares[batch] = share;
  }

  /** The epoch's shares, once its batches' callbacks ran (a callback's failure thrown here); reset for the next. */
  async epochShares(): Promise<HostStepShare[]> {
    await this.chain;
    if (this.failure !== undefined) throw this.failure;
    const shares = this.shares;
    this.shares = [];
    return shares;
  }
}
