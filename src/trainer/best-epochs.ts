/**
 * `keepBest` (`--keep-best K`): the models of the K best epochs by the monitored log, kept in `out/best/epoch-<E>`
 * (model.json and weights.bin, loadable by `tf.loadLayersModel`), as fit's bestCheckpoints keeps them: an epoch among
 * the best K so far is written when it ends, and the one it pushes out is removed. Higher is better when the monitor's
 * name has `acc` in it, else lower (as early stopping's mode `auto`); ties keep the earlier epoch. The model is built
 * once on the main thread (tfjs's CPU engine) and takes each kept epoch's weights. Host 0 alone writes.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import * as tf from '#tfjs';
import type { ResolvedConfig } from '../config-types.js';
import { buildModel } from '../model/resolve-model.js';
import { assignWeight } from '../model/flat-weights.js';
import { modelArtifacts, writeModelFiles } from '../actors/model-files.js';
import { OUT_FILES } from '../output/output-places.js';
import type { EpochEnd } from './run-types.js';

/** A kept epoch: its number (1 first), its monitored value, its folder. */
export interface KeptEpoch {
  epoch: number;
  value: number;
  dir: string;
}

export class BestEpochs {
  readonly kept: KeptEpoch[] = [];
  private model?: Promise<tf.LayersModel>;
  private readonly sign: number;

  constructor(
    private readonly cfg: Pick<ResolvedConfig, 'model' | 'out'>,
    private readonly keep: number,
    readonly monitor: string,
  ) {
    this.sign = monitor.includes('acc') ? -1 : 1;
  }

  /** The epoch's logs seen: its model written if it is among the best `keep` so far, the one pushed out removed. */
  async epochEnded(end: EpochEnd, logs: Record<string, number>): Promise<void> {
    const value = logs[this.monitor];
    if (value === undefined || Number.isNaN(value)) return;
    const worst = this.kept[this.kept.length - 1];
    if (this.kept.length >= this.keep && this.sign * value >= this.sign * worst.value) return;
    const dir = path.join(this.cfg.out!, OUT_FILES.bestDir, `epoch-${end.epoch}`);
    this.model ??= buildModel(tf, this.cfg.model);
    const model = await this.model;
    const { weights, nonTrainableWeights } = await end.weights();
    const set = (vars: tf.LayerVariable[], values: { values: Float32Array }[]) =>
      vars.forEach((v, i) =>
        tf.tidy(() => {
          assignWeight(v, tf.tensor(values[i].values, v.shape as number[], 'float32')); // as trained
        }),
      );
    set(model.trainableWeights, weights);
    set(model.nonTrainableWeights, nonTrainableWeights);
    await writeModelFiles(dir, await modelArtifacts(tf, model));
    this.kept.push({ epoch: end.epoch, value, dir });
    this.kept.sort((a, b) => this.sign * (a.value - b.value) || a.epoch - b.epoch);
    for (const out of this.kept.splice(this.keep)) await rm(out.dir, { recursive: true, force: true });
  }

  close(): void {
    void this.model?.then(m => m.dispose()).catch(() => {});
  }
}
