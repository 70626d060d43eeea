/**
 * A fit's validation across devices, its threads started once per fit: each of `devices` worker threads loads the
 * model and its contiguous shard of whole batches of the validation samples once (evaluate.ts's shards), then, at each
 * epoch's end, takes the model's current weights and answers tfjs's own `model.evaluate` on its shard; the means
 * weighted by samples are the epoch's `val_` logs, one engine's within float rounding. Several hosts: each host's
 * threads take its share of the batches, and the hosts add their sums up (fit-hosts.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import * as tf from '#tfjs';
import { DEFAULT_DEVICES } from '../world/world-options.js';
import { RequestThread, allReady } from '../actors/request-thread.js';
import { defaultBackend } from '../engine/backend.js';
import { modelArtifacts, writeModelFiles } from '../actors/model-files.js';
import { workerFlags } from '../actors/worker-exec-argv.js';
import { bundledEntry } from '../bundled-entry.js';
import { samplesOf, shardsOf, type ValidationOn } from './evaluate.js';
import { pluginUrls } from '../config/plugin-urls.js';
import { metricFunctionsOf } from './fit-metrics.js';
import type { EvaluateRequest, EvaluateShard } from './evaluate-worker.js';
import { validationLogs, type ValidationPart } from './fit-hosts.js';
import type { RunHosts } from '../trainer/run-types.js';
import type { OutputsSpec } from './fit-outputs.js';

type Answer = { type: 'ready' } | { type: 'result'; values: number[]; samples: number };

/** One validation thread: its requests answered in order. */
type ShardThread = RequestThread<Answer, EvaluateRequest>;

/** `val_loss`, `val_<metric>` of the model's weights at each call; `close()` ends the threads and removes the files. */
export class ValidationPool {
  private threads?: Promise<ShardThread[]>;
  private dir?: string;

  constructor(
    private readonly model: tf.LayersModel,
    private readonly x: tf.Tensor,
    private readonly y: tf.Tensor,
    private readonly batchSize: number,
    private readonly on: ValidationOn,
    /** A model of several outputs (`model` its flat-output wrapper): the outputs, and the names the model logs. */
    private readonly outputs?: { spec: OutputsSpec; names: string[] },
  ) {}

  /** The names of the values, as the model logs them (`loss`, its metrics). */
  private get names(): string[] {
    return this.outputs?.names ?? this.model.metricsNames;
  }

  async logs(): Promise<Record<string, number>> {
    return validationLogs([await this.part()], this.names);
  }

  /**
   * The sums over this host's part of the samples (all of them on one host; several hosts: host h's contiguous run of
   * whole batches, fit-hosts.ts adds the hosts' parts up). The part is fixed at the first call.
   */
  async part(hosts?: Pick<RunHosts, 'process' | 'processes'>): Promise<ValidationPart> {
    this.threads ??= this.start(
      hosts ? shardsOf(this.x.shape[0], this.batchSize, hosts.processes)[hosts.process] : undefined,
    );
    const threads = await this.threads;
    const weights =
      threads.length > 0 ? this.model.weights.map(w => Float32Array.from(w.read().dataSync() as Float32Array)) : [];
    const replies = (await Promise.all(threads.map(t => t.ask({ weights })))) as (Answer & { type: 'result' })[];
    return {
      sums: this.names.map((_, i) => replies.reduce((s, r) => s + r.values[i] * r.samples, 0)),
      samples: replies.reduce((s, r) => s + r.samples, 0),
    };
  }

  /** The threads of the samples [from, from + count) (all by default; none: no thread). */
  private async start(range: [number, number] | undefined = [0, this.x.shape[0]]): Promise<ShardThread[]> {
    const { model, x, y, batchSize } = this;
    if (range === undefined) return []; // several hosts, fewer batches than hosts: none here
    const loss: unknown = Array.isArray(model.loss) ? model.loss[0] : model.loss;
    this.dir = await mkdtemp(path.join(os.tmpdir(), 'tandem-validation-'));
    const modelJson = await writeModelFiles(path.join(this.dir, 'model'), await modelArtifacts(tf, model));
    const backend = this.on.backend ?? defaultBackend();
    const metrics = metricFunctionsOf(model, 'fit');
    const plugins = pluginUrls(this.on.plugins);
    const outputs = this.outputs?.spec;
    const job = { backend, plugins, modelJson, loss: loss as string, metrics, ...(outputs ? { outputs } : {}) };
    const [first, samples] = range;
    const threads = shardsOf(samples, batchSize, this.on.devices ?? DEFAULT_DEVICES).map(([from, count], d) => {
      const shard: EvaluateShard = { ...job, batchSize, persistent: true, ...samplesOf(x, y, first + from, count) };
      const what = `validation on device ${d}`;
      return new RequestThread<Answer, EvaluateRequest>(
        new Worker(bundledEntry(new URL('./evaluate-worker.js', import.meta.url)), {
          workerData: shard,
          name: `tandem-${what}`,
          ...workerFlags(),
        }),
        what,
      );
    });
    return allReady(threads);
  }

  async close(): Promise<void> {
    const threads = (await this.threads?.catch(() => undefined)) ?? [];
    await Promise.all(threads.map(t => t.close()));
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }
}
