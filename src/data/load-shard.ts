/**
 * Loading one device's shard (a loader thread's piscina task, load-shard-task.ts, or the main thread's own with
 * `loaderThreads: 0`): reads its samples into the shared input and label buffers, each through a view of exactly
 * that sample. Checks what can only be checked at loading: labels in range (and, through the reader, every input
 * written and finite), naming the sample index.
 */
import { TandemError, serializeError, type SerializedError } from '../errors.js';
import { loadPlugins } from '../plugins/load-plugins.js';
import { probeEnter, type PluginValues } from '../plugins/step-probes.js';
import type { DatasetSpec } from './dataset.js';
import { resolveDataset } from './resolve-dataset.js';
import { SampleReader } from './one-sample-view.js';
import { checkedClassLabel } from './class-labels.js';
import { checkLabelAgrees, readTargetInto } from './dataset-checks.js';
import { sourcePath } from '../source-path.js';
import { found } from './returned-value.js';
import { setStreamStep } from './ring-dataset.js';
export interface LoadShardTask {
  dataset: DatasetSpec;
  /** The step whose global batch the indices are of (a streamed dataset reads by it). */
  step: number;
  indices: Int32Array;
  inputs: SharedArrayBuffer;
  /** In floats. */
  inputOffset: number;
  labels: SharedArrayBuffer;
  /** In int32s. */
  labelOffset: number;
  /** Method B: global label -> this device's local label (-1: not owned). */
  labelMap?: Int32Array;
  /** Regression: `read` returns a float target, stored as float32 in the label slot (any finite value). */
  floatTargets?: boolean;
  /** A dataset with a targetShape: `readTarget` writes this many floats per sample, from labelOffset on. */
  targetFloats?: number;
  /** The run's plugins, loaded by this thread, whose step probes see the load of (device, step). */
  probe?: { plugins: readonly string[]; values: PluginValues; device: number; step: number };
}

/** The task's answer: the samples read, or its error as data (so its code survives the thread boundary). */
export type LoadShardResult = { type: 'loaded'; count: number } | { type: 'error'; error: SerializedError };

export default async function loadShard(task: LoadShardTask): Promise<LoadShardResult> {
  if (task.probe) await probeLoad(task.probe); // outside the boundary: a probe's throw fails the task itself
  try {
    return { type: 'loaded', count: await readShard(task) };
  } catch (err) {
    return { type: 'error', error: serializeError(err) };
  }
}

async function probeLoad({ plugins, values, device, step }: NonNullable<LoadShardTask['probe']>): Promise<void> {
  await loadPlugins(plugins);
  probeEnter({ thread: 'loader', phase: 'load', device, step }, values);
}

async function readShard(task: LoadShardTask): Promise<number> {
  const ds = await resolveDataset(task.dataset);
  setStreamStep(ds, task.step);
  const inputs = new Float32Array(task.inputs);
  const labels = new Int32Array(task.labels);
  const targets = new Float32Array(task.labels);
  const reader = new SampleReader(ds, task.dataset.source);
  const source = sourcePath(task.dataset.source);
  const per = reader.sampleFloats;
  if (task.targetFloats !== undefined) {
    const floats = task.targetFloats;
    task.indices.forEach((index, i) => {
      reader.read(index, inputs, task.inputOffset + i * per);
      readTargetInto(ds, index, targets, task.labelOffset + i * floats, task.dataset.source);
    });
    return task.indices.length;
  }
  task.indices.forEach((index, i) => {
    const offset = task.inputOffset + i * per;
    const label = reader.read(index, inputs, offset);
    checkLabelAgrees(ds, index, label, task.dataset.source);
    if (task.floatTargets) {
      if (!Number.isFinite(label))
        throw new TandemError(
          'BAD_DATA',
          `dataset ${source}: sample ${index} has target ${found(label)}, not a finite number`,
        );
      targets[task.labelOffset + i] = label;
    } else {
      checkedClassLabel(label, ds.classes, source, index);
    }
    if (task.labelMap) {
      const local = task.labelMap[label];
      if (local < 0)
        throw new TandemError(
          'BAD_DATA',
          `sample ${index} has label ${label}, which this device does not own (loader bug)`,
        );
      labels[task.labelOffset + i] = local;
    } else if (!task.floatTargets) {
      labels[task.labelOffset + i] = label;
    }
  });
  return task.indices.length;
}
