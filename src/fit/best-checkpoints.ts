/**
 * `bestCheckpoints({ dir, keep, monitor, mode })`: a callback that keeps, in `dir`, the model of the `keep` best epochs
 * by a monitored log (`val_loss` by default, the lower the better; `mode: 'max'` for an accuracy), as Keras's
 * `ModelCheckpoint(save_best_only)` keeps one: at each epoch's end, an epoch among the best `keep` so far is saved as
 * `dir/epoch-<E>` (model.json and weights.bin, loadable by `tf.loadLayersModel`), and the one it pushes out of the best
 * `keep` is removed. `best()` lists the kept epochs, best first. A tf.Callback (tested with tandem's `fit`).
 * Several hosts: every host's callbacks see the same logs, so give it on one host (host 0) only.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import * as tf from '#tfjs';
import { TandemError } from '../errors.js';
import { modelArtifacts, writeModelFiles } from '../actors/model-files.js';

export interface BestCheckpointsArgs {
  /** The directory the kept epochs' models go in (one folder `epoch-<E>` each). */
  dir: string;
  /** How many epochs to keep (default 1). */
  keep?: number;
  /** The log to rank by (default `val_loss`). */
  monitor?: string;
  /** `min` (default): lower is better; `max`: higher is better. */
  mode?: 'min' | 'max';
}

/** One kept epoch: its number, its monitored value, its folder. */
export interface KeptEpoch {
  epoch: number;
  value: number;
  dir: string;
}

export class BestCheckpoints extends tf.Callback {
  private kept: KeptEpoch[] = [];
  private readonly keep: number;
  private readonly monitor: string;
  private readonly sign: number;

  constructor(private readonly args: BestCheckpointsArgs) {
    super();
    if (typeof args !== 'object' || args === null || typeof args.dir !== 'string' || args.dir === '')
      throw new TandemError('BAD_CONFIG', 'bestCheckpoints: give { dir: the directory to keep the models in, … }');
    const keep = args.keep ?? 1;
    if (!Number.isInteger(keep) || keep < 1)
      throw new TandemError('BAD_CONFIG', `bestCheckpoints: keep must be an integer ≥ 1, got ${String(args.keep)}`);
    const mode = args.mode ?? 'min';
    if (mode !== 'min' && mode !== 'max')
      throw new TandemError('BAD_CONFIG', `bestCheckpoints: mode must be 'min' or 'max', got ${String(args.mode)}`);
    this.keep = keep;
    this.monitor = args.monitor ?? 'val_loss';
    this.sign = mode === 'min' ? 1 : -1;
  }

  /** The kept epochs, best first. */
  best(): KeptEpoch[] {
    return [...this.kept];
  }

  override async onEpochEnd(epoch: number, logs?: tf.Logs): Promise<void> {
    const value = logs?.[this.monitor];
    if (typeof value !== 'number' || Number.isNaN(value))
      throw new TandemError(
        'BAD_CONFIG',
        `bestCheckpoints: the epoch's logs have no '${this.monitor}' (they have ` +
          `${Object.keys(logs ?? {}).join(', ')})` +
          `; monitor one of them`,
      );
    const worst = this.kept[this.kept.length - 1];
    if (this.kept.length >= this.keep && this.sign * value >= this.sign * worst.value) return;
    const dir = path.join(this.args.dir, `epoch-${epoch}`);
    await writeModelFiles(dir, await modelArtifacts(tf, this.model as tf.LayersModel));
    this.kept.push({ epoch, value, dir });
    this.kept.sort((a, b) => this.sign * (a.value - b.value) || a.epoch - b.epoch);
    for (const out of this.kept.splice(this.keep)) await rm(out.dir, { recursive: true, force: true });
  }
}

/** A callback keeping the models of the `keep` best epochs by `monitor` in `dir` (see BestCheckpoints). */
export function bestCheckpoints(args: BestCheckpointsArgs): BestCheckpoints {
  return new BestCheckpoints(args);
}
