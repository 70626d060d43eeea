/**
 * The run's epoch logs as the config asks for them (data/validation-options.ts): the validation split, early stopping
 * and the best epochs kept, checked against the method, the loss and the outputs; the held-out samples the split
 * takes (the last ones, as tfjs's validationSplit).
 */
import { bad } from '../config-checks.js';
import type { TrainConfig } from '../config-types.js';
import { earlyStoppingOf, type EpochLogsConfig } from '../data/validation-options.js';
import { isRegressionLoss, type LossKind } from '../model/loss-kinds.js';
import { dataParallelMethod } from './data-parallel-method.js';

/** The samples the validation split holds out of `size` (tfjs: the first floor(size · (1 - split)) train). */
export function validationHeldOut(config: TrainConfig, size: number): number | undefined {
  const split = config.validationSplit;
  if (split === undefined) return undefined;
  if (config.heldOut !== undefined)
    bad('validationSplit', 'holds out the last fraction of the samples, and heldOut too was given: give one of them');
  return size - Math.floor(size * (1 - split));
}

/** `{ epochLogs }` of `config` (`{}`: none asked for), else BAD_CONFIG naming the option and the fix. */
export function epochLogsOf(
  config: TrainConfig,
  method: string,
  loss: LossKind | undefined,
  metrics?: string[],
): { epochLogs?: EpochLogsConfig } {
  const { validationSplit, earlyStopping, keepBest } = config;
  if (validationSplit === undefined && earlyStopping === undefined && keepBest === undefined) return {};
  const validation = validationSplit !== undefined;
  if (!dataParallelMethod(method))
    bad(
      validation ? 'validationSplit' : earlyStopping ? 'earlyStopping' : 'keepBest',
      `is for data-parallel ` + `training, not --method ${method}`,
    );
  const stopping = earlyStopping === undefined ? undefined : earlyStoppingOf(earlyStopping, 'earlyStopping');
  const monitor = stopping?.monitor ?? (validation ? 'val_loss' : 'loss');
  const logs = ['loss', ...(isRegressionLoss(loss) ? [] : ['acc']), ...(metrics ?? [])];
  const known = validation ? [...logs, ...logs.map(l => `val_${l}`)] : logs;
  if (!known.includes(monitor))
    bad(
      stopping ? 'earlyStopping' : 'keepBest',
      `monitors '${monitor}', which the epoch logs do not have (they have ${known.join(', ')})` +
        (monitor.startsWith('val_') && !validation ? ': add --validation-split F for the val_ logs' : ''),
    );
  if (keepBest !== undefined && config.out === undefined)
    bad('keepBest', "keeps the best epochs' models in --out DIR/best, and no --out was given: add --out DIR");
  const out: EpochLogsConfig = { validation };
  if (stopping) out.earlyStopping = stopping;
  if (keepBest !== undefined) out.keepBest = { keep: keepBest, monitor };
  return { epochLogs: out };
}
