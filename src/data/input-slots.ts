/**
 * The shared input and label buffers' layout: one slot per device and step parity (double-buffered: step s uses slot
 * s % 2, so step s+1 loads while s trains). Its own module: a device thread reads its slots without loading the
 * loaders' thread pool.
 */
export interface InputBuffers {
  inputs: SharedArrayBuffer;
  labels: SharedArrayBuffer;
  /** Floats per device slot. */
  inputSlotSize: number;
  /** Labels (or target floats: targetFloats per sample) per device slot. */
  labelSlotSize: number;
}

export const INPUT_SLOTS = 2;

/** `targetFloats`: the floats of one sample's target (1: a label or a float target). */
export function allocateInputBuffers(
  devices: number,
  perDevice: number,
  sampleSize: number,
  targetFloats = 1,
): InputBuffers {
  const inputSlotSize = perDevice * sampleSize,
    labelSlotSize = perDevice * targetFloats;
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
