/**
 * The fixed shared-memory layout of a run in one process. Each buffer holds
 * one slot per local device; a slot is the device's full copy (parameters, gradients, optimizer
 * state) in the transmission-order layout of `ParameterLayout`. Tensors cross
 * threads as (buffer, offset, length), never copied into messages.
 */
import { TandemError } from '../errors.js';
import type { InputBuffers } from '../data/input-slots.js';
import type { SlotBuffer } from '../collectives/transport.js';

export interface SharedBuffers extends InputBuffers {
  control: SharedArrayBuffer;
  params: SharedArrayBuffer;
  grads: SharedArrayBuffer;
  optimizerState: SharedArrayBuffer;
  /**
   * The model's non-trainable weights (BatchNormalization's moving statistics, frozen layers), model order: device 0's
   * reach every replica at step 0.
   */
  modelState: SharedArrayBuffer;
  /** Floats per device slot of modelState. */
  stateTotal: number;
  /** Floats per device slot of params/grads. */
  total: number;
  stateSlots: number;
  /** Slots: this process's devices. */
  devices: number;
  /** When the run checkpoints: device 0's values before the update in flight (step-preimage.ts). */
  preimage?: SharedArrayBuffer;
  /**
   * Every group's update copied, the last one's too (an elastic run: a host that completed a step its peers did not
   * rolls back to theirs).
   */
  preimageEveryGroup?: boolean;
  /**
   * A world of one device on one CPU (actors/inline-update.ts): its compute thread applies each step's update after
   * backward, and its comm thread only starts the run.
   */
  updatesOnCompute?: boolean;
  /**
   * Precision bf16 on the native engine: each device's parameters in bf16 (params' indexing), which its comm thread
   * writes after each group's update, and per device and group the step that copy holds (Int32, -1 none yet). The
   * device's passes read the copy in place of casting the weights again (actors/params-mirror.ts).
   */
  paramsBf16?: SharedArrayBuffer;
  paramsBf16Steps?: SharedArrayBuffer;
}

/** The parameter and gradient buffers as a transport may read them in place (slot r = local device r). */
export function registeredSlots(b: SharedBuffers): SlotBuffer[] {
  return [
    ...[b.params, b.grads].map(buffer => ({ buffer, slotFloats: b.total, slots: b.devices })),
    { buffer: b.modelState, slotFloats: b.stateTotal, slots: b.devices },
  ];
}

export function allocateShared(bytes: number, what: string): SharedArrayBuffer {
  try {
    return new SharedArrayBuffer(bytes);
  } catch (err) {
    throw new TandemError(
      'OUT_OF_MEMORY',
      `could not allocate ${(bytes / 2 ** 20).toFixed(1)} MiB of shared memory for ${what}; ` +
        'use fewer devices or a smaller model',
      undefined,
      { cause: err },
    );
  }
}

export function allocateModelBuffers(
  devices: number,
  total: number,
  stateSlots: number,
  stateTotal: number,
): Pick<
  SharedBuffers,
  'params' | 'grads' | 'optimizerState' | 'modelState' | 'stateTotal' | 'total' | 'stateSlots' | 'devices'
> {
  return {
    params: allocateShared(devices * total * 4, 'parameters'),
    grads: allocateShared(devices * total * 4, 'gradients'),
    optimizerState: allocateShared(Math.max(1, devices * stateSlots * total * 4), 'optimizer state'),
    modelState: allocateShared(Math.max(1, devices * stateTotal * 4), 'non-trainable weights'),
    total,
    stateSlots,
    devices,
    stateTotal,
  };
}

/** The bf16 copy of the parameters and its steps, one slot per device, for `groups` exchange groups. */
export function allocateParamsBf16(
  devices: number,
  total: number,
  groups: number,
): Pick<SharedBuffers, 'paramsBf16' | 'paramsBf16Steps'> {
  const steps = allocateShared(devices * groups * 4, 'the bf16 parameter copy');
  new Int32Array(steps).fill(-1);
  return { paramsBf16: allocateShared(devices * total * 2, 'the bf16 parameter copy'), paramsBf16Steps: steps };
}

/** Device `device`'s bf16 parameter copy and the step each of its `groups` groups holds, when the run keeps one. */
export function paramsBf16Of(
  b: SharedBuffers,
  device: number,
  groups: number,
): { bits: Uint16Array; steps: Int32Array } | undefined {
  if (!b.paramsBf16 || !b.paramsBf16Steps) return undefined;
  return {
    bits: new Uint16Array(b.paramsBf16, device * b.total * 2, b.total),
    steps: new Int32Array(b.paramsBf16Steps, device * groups * 4, groups),
  };
}

export function modelStateSlots(b: SharedBuffers): Float32Array[] {
  return slots(b.modelState, b.devices, b.stateTotal);
}

export function paramSlots(b: SharedBuffers): Float32Array[] {
  return slots(b.params, b.devices, b.total);
}

export function gradSlots(b: SharedBuffers): Float32Array[] {
  return slots(b.grads, b.devices, b.total);
}

export function optimizerStateOf(b: SharedBuffers, device: number): Float32Array[] {
  return Array.from(
    { length: b.stateSlots },
    (_, j) => new Float32Array(b.optimizerState, (device * b.stateSlots + j) * b.total * 4, b.total),
  );
}

function slots(buffer: SharedArrayBuffer, devices: number, total: number): Float32Array[] {
  return Array.from({ length: devices }, (_, d) => new Float32Array(buffer, d * total * 4, total));
}
