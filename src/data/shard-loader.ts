/**
 * Main side of data loading: a piscina pool fills each device's input slot
 * (double-buffered: step s uses slot s % 2, so step s+1 loads while s trains)
 * in the shared input and label buffers. With no loader threads (`loaderThreads: 0`, the default of a process
 * that has one CPU) the main thread loads each shard itself: on one core a loader thread only adds a round trip
 * (the task's message, a thread woken, the answer's) to every step.
 */
import type { PluginValues } from '../plugins/step-probes.js';
import { Piscina } from 'piscina';
import { bundledEntry } from '../bundled-entry.js';
import { workerFlags } from '../actors/worker-exec-argv.js';
import type { DatasetSpec } from './dataset.js';
import loadShard, { type LoadShardResult, type LoadShardTask } from './load-shard.js';
import { deserializeError } from '../errors.js';
import { INPUT_SLOTS, inputSlotIndex, type InputBuffers } from './input-slots.js';

/** Which dataset indices device d reads at step s. */
export interface ShardSampler {
  shardIndices(step: number, device: number): Int32Array;
}

export interface ShardLoaderOptions {
  /** Threads per pool; 0: no pool, the main thread loads. */
  threads: number;
  /** One pool per device (method B's dedicated loaders) instead of one shared pool. */
  poolPerDevice?: boolean;
  /** labelMap[d][label] = device d's local index of a global label (method B). */
  labelMaps?: Int32Array[];
  /** Regression: the dataset's `read` returns float targets (stored as float32 in the label slots). */
  floatTargets?: boolean;
  /** The dataset has a targetShape: `readTarget` writes this many floats per sample into the label slots. */
  targetFloats?: number;
  /**
   * Global rank of each local device (default: the local index). Samplers, label maps and faults speak global ranks.
   */
  ranks?: readonly number[];
  /** The run's plugins and their option values: the loader threads load them and call their step probes. */
  probes?: { plugins: readonly string[]; values: PluginValues };
}

/** A failed load, with the device whose shard it was. */
export class ShardLoadError extends Error {
  constructor(
    readonly device: number,
    readonly step: number,
    cause: unknown,
  ) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
  }
}

export class ShardLoader {
  private readonly pools: Piscina[];
  /** Devices (global ranks) whose shard of the latest fill has not arrived yet. */
  readonly pending = new Set<number>();

  constructor(
    private readonly dataset: DatasetSpec,
    private readonly buffers: InputBuffers,
    private readonly sampler: ShardSampler,
    private readonly devices: number,
    private readonly options: ShardLoaderOptions,
  ) {
    const pools = options.threads === 0 ? 0 : options.poolPerDevice ? devices : 1;
    this.pools = Array.from(
      { length: pools },
      () =>
        new Piscina({
          filename: bundledEntry(new URL('./load-shard-task.js', import.meta.url)).href,
          ...workerFlags(), // the process's Node flags, or TANDEM_WORKER_EXEC_ARGV's (a test runner's hooks left out)
          minThreads: options.threads,
          maxThreads: options.threads,
          idleTimeout: 60_000,
        }),
    );
  }

  /** Fills every device's slot `step % 2` with its shard of global batch `step`. */
  async fill(step: number): Promise<void> {
    const slot = step % INPUT_SLOTS;
    const tasks: Promise<void>[] = [];
    for (let local = 0; local < this.devices; local++) {
      const d = this.options.ranks?.[local] ?? local;
      const at = inputSlotIndex(local, slot);
      const task: LoadShardTask = {
        dataset: this.dataset,
        step,
        indices: this.sampler.shardIndices(step, d),
        inputs: this.buffers.inputs,
        inputOffset: at * this.buffers.inputSlotSize,
        labels: this.buffers.labels,
        labelOffset: at * this.buffers.labelSlotSize,
        labelMap: this.options.labelMaps?.[d],
        floatTargets: this.options.floatTargets,
        targetFloats: this.options.targetFloats,
        probe: this.options.probes && { ...this.options.probes, device: d, step },
      };
      this.pending.add(d);
      tasks.push(
        this.load(task, local).then(
          r => {
            if (r.type === 'error') throw new ShardLoadError(d, step, deserializeError(r.error));
            this.pending.delete(d);
          },
          (err: unknown) => {
            throw new ShardLoadError(d, step, err);
          },
        ),
      );
    }
    await Promise.all(tasks);
  }

  /** `task` on its device's pool, or on this thread where there is none. */
  private load(task: LoadShardTask, local: number): Promise<LoadShardResult> {
    if (this.pools.length === 0) return loadShard(task);
    return this.pools[this.pools.length === 1 ? 0 : local].run(task) as Promise<LoadShardResult>;
  }

  async close(): Promise<void> {
    await Promise.all(this.pools.map(p => p.destroy()));
  }
}
