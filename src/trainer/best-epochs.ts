/**
 * `keepBest` (`--keep-best K`): the models of the K best epochs by the monitored log, kept in `out/best/epoch-<E>`
 * (model.json and weights.bin, loadable by `tf.loadLayersModel`), as fit's bestCheckpoints keeps them: an epoch among
 * the best K so far is written when it ends, and the one it pushes out is removed. Higher is better when the monitor's
 * name has `acc` in it, else lower (as early stopping's mode `auto`); ties keep the earlier epoch. The model is built
 * once on the main thread (tfjs's CPU engine) and takes each kept epoch's weights. Host 0 alone writes. The kept
 * epochs and their values are listed in `best/kept.json`, so a resumed run (`--resume`, the same `--out`) goes on
 * ranking with the epochs kept before it (those it trains again are dropped) instead of keeping K more.
 */
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
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
  private restored = false;

  constructor(
    private readonly cfg: Pick<ResolvedConfig, 'model' | 'out' | 'resume'>,
    private readonly keep: number,
    readonly monitor: string,
  ) {
    this.sign = monitor.includes('acc') ? -1 : 1;
  }

  /** The epoch's logs seen: its model written if it is among the best `keep` so far, the one pushed out removed. */
  async epochEnded(end: EpochEnd, logs: Record<string, number>): Promise<void> {
    await this.restoreOnce(end.epoch);
    const value = logs[this.monitor];
    if (value === undefined || Number.isNaN(value)) return;
    const worst = this.kept[this.kept.length - 1];
    if (this.kept.length >= this.keep && this.sign * value >= this.sign * worst.value) return;
    const dir = this.dirOf(end.epoch);
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
    await this.trim();
  }

  /** The kept ranked, those past `keep` removed, the list written. */
  private async trim(): Promise<void> {
    this.kept.sort((a, b) => this.sign * (a.value - b.value) || a.epoch - b.epoch);
    for (const out of this.kept.splice(this.keep)) await rm(out.dir, { recursive: true, force: true });
    const list = this.listPath();
    await writeFile(`${list}.tmp`, JSON.stringify(this.kept.map(({ epoch, value }) => ({ epoch, value }))));
    await rename(`${list}.tmp`, list);
  }

  /**
   * Resumed: the epochs the run kept before (best/kept.json), those before `epoch` (the first to end now) taken back,
   * the others' folders removed (this run trains those epochs again). Not resumed, or no list: none.
   */
  private async restoreOnce(epoch: number): Promise<void> {
    if (this.restored) return;
    this.restored = true;
    if (this.cfg.resume === undefined) return;
    let earlier: unknown;
    try {
      earlier = JSON.parse(await readFile(this.listPath(), 'utf8'));
    } catch {
      return; // none written (or not whole): the run starts ranking afresh
    }
    if (!Array.isArray(earlier)) return;
    for (const k of earlier as Partial<KeptEpoch>[]) {
      if (!Number.isInteger(k.epoch) || typeof k.value !== 'number') continue;
      const dir = this.dirOf(k.epoch!);
      if (k.epoch! < epoch) this.kept.push({ epoch: k.epoch!, value: k.value, dir });
      else await rm(dir, { recursive: true, force: true });
    }
    await this.trim();
  }

  private dirOf(epoch: number): string {
    return path.join(this.cfg.out!, OUT_FILES.bestDir, `epoch-${epoch}`);
  }

  private listPath(): string {
    return path.join(this.cfg.out!, OUT_FILES.bestDir, 'kept.json');
  }

  close(): void {
    void this.model?.then(m => m.dispose()).catch(() => {});
  }
}
