/**
 * A device replica's model and the shared buffers: its variables copied to and from a flat slot (transmission order),
 * its non-trainable weights as one flat array, its BatchNormalization layers set up for training, a step's inputs.
 */
import type { InlineUpdate } from './inline-update.js';
import * as tf from '#tfjs';
import { isRegressionLoss, type ResolvedConfig } from '../config-types.js';
import type { ComputeConfig } from './config-slices.js';
import { TandemError } from '../errors.js';
import type { Collective } from '../collectives/collective.js';
import type { LayersModel, LayerVariable } from '../engine/tfjs-types.js';
import { assignWeight, readFlat, writeFlat } from '../model/flat-weights.js';
import type { ParameterLayout } from '../model/parameter-layout.js';
import { batchNormalizationLayers, trainBatchNormalization } from '../model/sync-batch-norm.js';
import type { ParameterGroup } from '../model/parameter-layout.js';
import type { DeviceMethod } from '../methods/training-method.js';
import type { RandomLayerSeeds } from '../model/seeded-random-layers.js';
import type { SharedBuffers } from './shared-buffers.js';
import type { ForwardGate } from './forward-gate.js';
import type { ParamsMirror } from '../engine/engine.js';

/** The replica after `build`. */
export interface Built {
  model: LayersModel;
  layout: ParameterLayout;
  /** The model's random layers, drawing from (seed, rank, step). */
  random: RandomLayerSeeds;
}

/** After `attach`: where the shared buffers are, and the method's part of the device. */
export interface Attached {
  buffers: SharedBuffers;
  groups: ParameterGroup[];
  params: Float32Array;
  grads: Float32Array;
  /** layout index of each model variable. */
  byModelIndex: number[];
  collective?: Collective;
  method: DeviceMethod;
  /** This device's slot of the non-trainable weights (device 0's values after the step-0 broadcast). */
  modelState: Float32Array;
  /** Whether the broadcast non-trainable weights were written into the model (once, before the first step). */
  stateApplied: boolean;
  /** forwardWait 'group': the per-group waits inside forward. */
  gate?: ForwardGate;
  /** The comm thread's bf16 copy of the parameters, as step `s` may read it (params-mirror.ts). */
  paramsBf16?: (step: number) => ParamsMirror;
  /** A world of one device on one CPU: the update this thread applies after each step (inline-update.ts). */
  inline?: InlineUpdate;
}

/** Copies between the model's variables and a flat slot (transmission order). */
export function copyVariables(
  model: LayersModel,
  layout: ParameterLayout,
  slot: Float32Array,
  direction: 'read' | 'write',
  syncReads: boolean,
): void {
  layout.variables.forEach((_, i) => {
    if (direction === 'read') readVariable(model, layout, slot, i);
    else writeVariable(model, layout, slot, i, syncReads);
  });
}

function readVariable(model: LayersModel, layout: ParameterLayout, slot: Float32Array, index: number): void {
  const spec = layout.variables[index];
  slot
    .subarray(spec.offset, spec.offset + spec.size)
    .set(model.trainableWeights[spec.modelIndex].read().dataSync() as Float32Array);
}

/** Sets layout variable `index` of the model from `slot`. */
export function writeVariable(
  model: LayersModel,
  layout: ParameterLayout,
  slot: Float32Array,
  index: number,
  syncReads: boolean,
): void {
  const spec = layout.variables[index];
  const values = slot.subarray(spec.offset, spec.offset + spec.size);
  // An asynchronous engine uploads later, from what it was given: a copy, never a view of the shared buffer.
  const t = tf.tensor(syncReads ? values : new Float32Array(values), spec.shape, 'float32');
  assignWeight(model.trainableWeights[spec.modelIndex], t);
  t.dispose();
}

/** The model's non-trainable weights, model order, as one flat array. */
export function readState(model: LayersModel): Float32Array {
  return readFlat(model.nonTrainableWeights);
}

/** Sets the model's non-trainable weights from one flat array (model order). */
export function writeState(model: LayersModel, flat: Float32Array): void {
  writeFlat(tf, model.nonTrainableWeights, flat);
}

/** Names of the BatchNormalization layers of `model`, nested models included. */
export function batchNormLayers(model: LayersModel): string[] {
  return batchNormalizationLayers(model).map(l => l.name);
}

/**
 * BatchNormalization layers: tandem's kernel reads its input on the host inside forward (synchronous engines
 * only; batchNorm 'sync' then all-reduces the batch statistics). Elsewhere tfjs's own layer trains on the device,
 * with this device's batch (local statistics). Returns, for batchNorm 'local' on several devices, the moving
 * statistics to average after every step.
 */
export function setUpBatchNorm(
  model: LayersModel,
  c: Pick<ResolvedConfig, 'devices' | 'batchNorm' | 'backend'>,
  syncReads: boolean,
  collective?: Collective,
): LayerVariable[] | undefined {
  const batchNorm = batchNormalizationLayers(model);
  const syncBatchNorm = collective && c.devices > 1 && c.batchNorm === 'sync';
  if (batchNorm.length > 0 && !syncReads && syncBatchNorm) throw asyncSyncBatchNormError(c.backend);
  if (batchNorm.length > 0 && syncReads)
    trainBatchNormalization(tf, model, syncBatchNorm ? collective.blocking : undefined);
  if (collective && batchNorm.length > 0 && c.devices > 1 && c.batchNorm === 'local') return movingStatistics(model);
  return undefined;
}

/** The moving statistics of the BatchNormalization layers of `model`. */
function movingStatistics(model: LayersModel): LayerVariable[] {
  return batchNormalizationLayers(model).flatMap(l => [l.movingMean, l.movingVariance] as unknown as LayerVariable[]);
}

/** Sync BatchNormalization reads activations on the host inside forward; an engine without synchronous reads cannot. */
function asyncSyncBatchNormError(backend: string): TandemError {
  return new TandemError(
    'BAD_CONFIG',
    `backend '${backend}' cannot read tensors synchronously, which batchNorm 'sync' needs inside forward ` +
      "(the statistics of the global batch); use --batch-norm local (each device's own batch, moving statistics " +
      'averaged after every step), one device, or a backend that reads synchronously (native, wasm, cpu)',
  );
}

/**
 * Step inputs in the shared buffers: slot `slot`'s samples, class labels, and float targets (the labels' bytes) of a
 * regression or of targets of a shape.
 */
export function inputsOf(buffers: SharedBuffers, slot: number, cfg: Pick<ComputeConfig, 'loss' | 'targetShape'>) {
  const regression = isRegressionLoss(cfg.loss) || cfg.targetShape !== undefined;
  const x = new Float32Array(buffers.inputs, slot * buffers.inputSlotSize * 4, buffers.inputSlotSize);
  const y = new Int32Array(buffers.labels, slot * buffers.labelSlotSize * 4, buffers.labelSlotSize);
  const targets = regression
    ? new Float32Array(buffers.labels, slot * buffers.labelSlotSize * 4, buffers.labelSlotSize)
    : undefined;
  return { x, y, targets };
}
