/**
 * Where each trainable variable lives in the flat shared buffers. Variables are
 * laid out in transmission order — the order backward produces their gradients,
 * output layer first — so a group of consecutive layers in that order is one
 * contiguous range, exchanged as one piece.
 */
export interface ParameterSpec {
  /** Variable name as tfjs knows it (e.g. `dense_Dense1/kernel`). */
  name: string;
  shape: number[];
  size: number;
  /** Offset in floats from the start of a device's slot. */
  offset: number;
  /** Index of the variable in `model.trainableWeights`. */
  modelIndex: number;
}

export interface ParameterGroup {
  name: string;
  /** Float range [start, end) in a device's slot. */
  start: number;
  end: number;
}

export interface ParameterLayout {
  variables: ParameterSpec[];
  total: number;
  groups: ParameterGroup[];
}

/** Lays out variables (given in model order) in transmission order, as one group per `splits`. */
export function layoutParameters(weights: { name: string; shape: number[] }[]): ParameterLayout {
  const variables: ParameterSpec[] = [];
  let offset = 0;
  for (let i = weights.length - 1; i >= 0; i--) {
    const { name, shape } = weights[i];
    const size = shape.reduce((a, b) => a * b, 1);
    variables.push({ name, shape: [...shape], size, offset, modelIndex: i });
    offset += size;
  }
  return { variables, total: offset, groups: [{ name: 'all', start: 0, end: offset }] };
}
