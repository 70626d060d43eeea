/**
 * The validation section of a train config: the last fraction of the samples held out and evaluated at every epoch's
 * end (`val_loss`, `val_acc` as tfjs's `model.fit` logs them), stopping early on a monitored log, and the best epochs'
 * models kept. Read by the trainer's epoch logs (trainer/epoch-logs.ts).
 */
import type { OptionTable } from '../options/declaration.js';
import { positiveInt } from '../options/option-checks.js';
import { bad, shown } from '../config-checks.js';

export interface ValidationOptions {
  /**
   * The last fraction of the samples, held out and evaluated at every epoch's end on the weights trained so far, as
   * tfjs's `model.fit` `validationSplit` (the first floor(n · (1 - split)) samples train).
   */
  validationSplit?: number;
  /** `MONITOR:PATIENCE` (`val_loss:2`): stop after PATIENCE epochs without improvement, as tfjs's earlyStopping. */
  earlyStopping?: string;
  /** Keep the models of the best K epochs by the monitored log in `out` (`best/epoch-<E>`). */
  keepBest?: number;
}

/** What the trainer logs at each epoch's end beyond the step lines, and what it does with the logs. */
export interface EpochLogsConfig {
  /** The validation split: the samples [trainSize, datasetSize) are evaluated at every epoch's end. */
  validation: boolean;
  /** Stop after `patience` epochs without improvement of `monitor` (tfjs's earlyStopping, minDelta 0). */
  earlyStopping?: { monitor: string; patience: number };
  /** Keep the models of the best `keepBest` epochs by `monitor` in out/best. */
  keepBest?: { keep: number; monitor: string };
}

function fraction(v: unknown, field: string): number {
  if (typeof v !== 'number' || !(v > 0 && v < 1)) bad(field, `must be a fraction in (0, 1), got ${shown(v)}`);
  return v;
}

/** `MONITOR:PATIENCE`, e.g. `val_loss:2`. */
export function earlyStoppingOf(v: unknown, field: string): { monitor: string; patience: number } {
  const m = typeof v === 'string' ? /^([A-Za-z_][A-Za-z0-9_]*):(\d+)$/.exec(v) : null;
  if (!m) bad(field, `must be MONITOR:PATIENCE (e.g. val_loss:2 or val_acc:3), got ${shown(v)}`);
  return { monitor: m[1], patience: Number(m[2]) };
}

export const VALIDATION_OPTIONS: OptionTable<ValidationOptions> = {
  validationSplit: {
    kind: 'real',
    group: 'model and data',
    hosts: 'same',
    arg: 'F',
    doc: "the last fraction F of the samples, evaluated every epoch (val_loss, val_acc), as tfjs's validationSplit",
    check: fraction,
  },
  earlyStopping: {
    kind: 'string',
    group: 'schedule',
    hosts: 'same',
    arg: 'MONITOR:PATIENCE',
    doc: "stop after PATIENCE epochs without improvement of MONITOR (val_loss:2), as tfjs's earlyStopping",
    check: (v, field) => (earlyStoppingOf(v, field), v as string),
  },
  keepBest: {
    kind: 'integer',
    group: 'checkpoint',
    hosts: 'own: host 0 alone writes --out DIR/best (whether epochs are logged is compared)',
    arg: 'K',
    doc: "keep the models of the K best epochs by --early-stopping's monitor (else val_loss) in --out DIR/best",
    check: positiveInt(1000),
  },
};
