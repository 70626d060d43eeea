/**
 * Main side of data loading: a piscina pool fills each device's input slot
 * (double-buffered: step s uses slot s % 2, so step s+1 loads while s trains)
 * in the shared input and label buffers.
 */
import { Piscina } from 'piscina';
import type { DatasetSpec } from './dataset.js';
import type { LoadShardTask } from './load-shard-task.js';
import type { GlobalBatchSampler } from './sampler.js';

export interface InputBuffers {
  inputs: SharedArrayBuffer;
  labels: SharedArrayBuffer;
  /** Floats per device slot. */
  inputSlotSize: number;
  /** Labels per device slot. */
  labelSlotSize: number;
}

export const INPUT_SLOTS = 2;

export function allocateInputBuffers(devices: number, perDevice: number, sampleSize: number): InputBuffers {
  const inputSlotSize = perDevice * sampleSize, labelSlotSize = perDevice;
  return {
    inputs: new SharedArrayBuffer(devices * INPUT_SLOTS * inputSlotSize * 4),
    labels: new SharedArrayBuffer(devices * INPUT_SLOTS * labelSlotSize * 4),
    inputSlotSize,
    labelSlotSize,
  };
}

/** Index of (device, slot) among the slots of the input buffers. */
export function inputSlotIndex(device: number, slot: number): number {
  return device * INPUT_SLOTS + slot;
}

export class ShardLoader {
  private readonly pool: Piscina;

  constructor(private readonly dataset: DatasetSpec, private readonly buffers: InputBuffers,
    private readonly sampler: GlobalBatchSampler, private readonly devices: number, threads: number) {
    this.pool = new Piscina({
      filename: new URL('./load-shard-task.js', import.meta.url).href,
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: 60_000,
    });
  }

  /** Fills every device's slot `step % 2` with its shard of global batch `step`. */
  async fill(step: number): Promise<void> {
    const slot = step % INPUT_SLOTS;
    const tasks: Promise<number>[] = [];
    for (let d = 0; d < this.devices; d++) {
      const at = inputSlotIndex(d, slot);
      const task: LoadShardTask = {
        dataset: this.dataset,
        indices: this.sampler.shardIndices(step, d, this.devices),
        inputs: this.buffers.inputs,
        inputOffset: at * this.buffers.inputSlotSize,
        labels: this.buffers.labels,
        labelOffset: at * this.buffers.labelSlotSize,
      };
      tasks.push(this.pool.run(task));
    }
    await Promise.all(tasks);
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }
}
