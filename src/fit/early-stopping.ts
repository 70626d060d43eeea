/**
 * `earlyStopping(args)`: tfjs's `tf.callbacks.earlyStopping` — the same monitor, minDelta, patience, mode and
 * baseline, stopping at the same epoch — plus what tfjs refuses ("restoreBestWeights = True is not implemented"):
 * with `restoreBestWeights`, a fit that stops early ends with the weights of its best epoch in the model, as Keras's
 * `EarlyStopping(restore_best_weights=True)` does (a fit that runs all its epochs keeps its last weights, as Keras).
 * The best epoch's weights are copied when it ends (one copy of the trainable and non-trainable weights held) and put
 * back at `onTrainEnd`, after the fit has loaded its last trained weights into the model. An epoch counts as best
 * only if it improved on `baseline` (when given): if none did, the last weights stay. Works with tandem's `fit`
 * and `fitDataset` and with tfjs's own `model.fit`.
 */
import * as tf from '#tfjs';
import { TandemError } from '../errors.js';
import { assignWeight } from '../model/flat-weights.js';

export interface EarlyStoppingArgs extends tf.EarlyStoppingCallbackArgs {
  /** The model ends with the weights of the epoch with the best monitored value when the fit stops early. */
  restoreBestWeights?: boolean;
}

/** tfjs's EarlyStopping's state this class reads (declared protected there). */
interface EarlyStoppingState {
  best: number;
  model: tf.LayersModel;
}

/** tf.callbacks.earlyStopping with `restoreBestWeights`. */
export class EarlyStoppingWithRestore extends tf.EarlyStopping {
  private readonly restore: boolean;
  private bestWeights: tf.Tensor[] | undefined;
  /** The epoch whose weights `bestWeights` holds. */
  bestEpoch = -1;
  /** This callback, not another, stopped the fit. */
  private stoppedHere = false;

  constructor(args: EarlyStoppingArgs = {}) {
    if (typeof args !== 'object' || args === null)
      throw new TandemError('BAD_CONFIG', `earlyStopping: args must be an object, got ${String(args)}`);
    const { restoreBestWeights, ...tfArgs } = args;
    if (restoreBestWeights !== undefined && typeof restoreBestWeights !== 'boolean')
      throw new TandemError(
        'BAD_CONFIG',
        `earlyStopping: restoreBestWeights must be true or false, got ${JSON.stringify(restoreBestWeights)}`,
      );
    super(tfArgs);
    this.restore = restoreBestWeights === true;
  }

  private get state(): EarlyStoppingState {
    return this as unknown as EarlyStoppingState;
  }

  override async onTrainBegin(logs?: tf.Logs): Promise<void> {
    this.dropBest();
    this.stoppedHere = false;
    await super.onTrainBegin(logs);
  }

  override async onEpochEnd(epoch: number, logs?: tf.Logs): Promise<void> {
    const before = this.state.best,
      stopping = this.state.model.stopTraining;
    await super.onEpochEnd(epoch, logs);
    if (!stopping && this.state.model.stopTraining) this.stoppedHere = true;
    if (this.restore && this.state.best !== before && this.monitored(logs)) this.keepBest(epoch); // improved
  }

  override async onTrainEnd(logs?: tf.Logs): Promise<void> {
    await super.onTrainEnd(logs);
    if (this.restore && this.stoppedHere && this.bestWeights !== undefined)
      this.state.model.weights.forEach((w, i) => assignWeight(w, this.bestWeights![i])); // as trained, unconstrained
    this.dropBest();
  }

  private monitored(logs: tf.Logs | undefined): boolean {
    return logs !== undefined && logs[this.monitor] !== undefined && logs[this.monitor] !== null;
  }

  private keepBest(epoch: number): void {
    this.dropBest();
    this.bestWeights = this.state.model.getWeights().map(w => w.clone());
    this.bestEpoch = epoch;
  }

  private dropBest(): void {
    this.bestWeights?.forEach(w => w.dispose());
    this.bestWeights = undefined;
    this.bestEpoch = -1;
  }
}

/** `tf.callbacks.earlyStopping(args)`, and `restoreBestWeights` works. */
export function earlyStopping(args?: EarlyStoppingArgs): EarlyStoppingWithRestore {
  return new EarlyStoppingWithRestore(args);
}
