/**
 * The run's validation at every epoch's end (`validationSplit`): the held-out samples [trainSize, datasetSize) in
 * contiguous runs of whole batches, one worker thread per local device (validation-worker.ts), started once per run;
 * each epoch's weights go to every thread, whose sums are added up here. Several hosts: each host's threads take its
 * share of the batches, and the epoch logs add the hosts' sums up (epoch-logs.ts).
 */
import { Worker } from 'node:worker_threads';
import type { ResolvedConfig } from '../config-types.js';
import { RequestThread, allReady } from '../actors/request-thread.js';
import { workerFlags } from '../actors/worker-exec-argv.js';
import { bundledEntry } from '../bundled-entry.js';
import { shardsOf } from '../data/batch-shards.js';
import type { ValidationAnswer, ValidationRequest, ValidationShard } from './validation-worker.js';

/** Sums over some validation samples: the loss times the samples, the correct ones, the metrics' two sums each. */
export interface ValidationSums {
  loss: number;
  correct: number;
  metricSums: number[];
  samples: number;
}

type Thread = RequestThread<ValidationAnswer, ValidationRequest>;

export type ValidationConfig = Pick<
  ResolvedConfig,
  'trainSize' | 'datasetSize' | 'batch' | 'topology' | 'backend' | 'plugins' | 'model' | 'data' | 'loss' | 'classes'
> &
  Pick<ResolvedConfig, 'targetShape' | 'metrics'>;

export class EpochValidation {
  private threads?: Promise<Thread[]>;

  constructor(private readonly cfg: ValidationConfig) {}

  /** This host's sums on `weights` (model order) and `state` (the non-trainable weights). */
  async sums(weights: Float32Array[], state: Float32Array[]): Promise<ValidationSums> {
    this.threads ??= this.start();
    const threads = await this.threads;
    const answers = await Promise.all(threads.map(t => t.ask({ weights, state })));
    const out: ValidationSums = { loss: 0, correct: 0, metricSums: [], samples: 0 };
    for (const a of answers) {
      if (a.type !== 'result') continue;
      out.loss += a.loss;
      out.correct += a.correct;
      out.samples += a.samples;
      a.metricSums.forEach((v, i) => (out.metricSums[i] = (out.metricSums[i] ?? 0) + v));
    }
    return out;
  }

  /** This host's threads: its share of the held-out batches, split over its devices. */
  private start(): Promise<Thread[]> {
    const { cfg } = this;
    const { process, processes, localDevices } = cfg.topology;
    const held = cfg.datasetSize - cfg.trainSize;
    const mine = shardsOf(held, cfg.batch, processes)[process];
    if (mine === undefined) return Promise.resolve([]); // fewer batches than hosts: none here
    const job = {
      ...{ backend: cfg.backend, plugins: cfg.plugins, model: cfg.model, data: cfg.data, classes: cfg.classes },
      ...(cfg.loss ? { loss: cfg.loss } : {}),
      ...(cfg.targetShape ? { targetShape: cfg.targetShape } : {}),
      ...(cfg.metrics ? { metrics: cfg.metrics } : {}),
      batch: cfg.batch,
    };
    const threads = shardsOf(mine[1], cfg.batch, localDevices).map(([from, count], d) => {
      const shard: ValidationShard = { ...job, from: cfg.trainSize + mine[0] + from, count };
      const what = `validation on device ${d}`;
      const worker = new Worker(bundledEntry(new URL('./validation-worker.js', import.meta.url)), {
        workerData: shard,
        name: `tandem-${what}`,
        ...workerFlags(),
      });
      return new RequestThread<ValidationAnswer, ValidationRequest>(worker, what);
    });
    return allReady(threads);
  }

  async close(): Promise<void> {
    const threads = (await this.threads?.catch(() => undefined)) ?? [];
    await Promise.all(threads.map(t => t.close()));
  }
}
