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
  /** The layer it belongs to (its name up to the last '/'). */
  layer: string;
}

/** A layer of the layout: consecutive variables of one layer, in transmission order. */
export interface LayerRange {
  name: string;
  start: number;
  end: number;
  /** Indices into `layout.variables`. */
  variables: number[];
  /** True when the layer holds a rank-2 kernel (a fully connected layer). */
  fullyConnected: boolean;
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

/**
 * Each variable's name (tfjs's original one, without the suffix a process adds) and shape, in the order given: what
 * layoutParameters lays out, and what hosts compare of the model a device builds.
 */
export function weightShapes(
  weights: readonly { originalName: string; shape: readonly (number | null)[] }[],
): { name: string; shape: number[] }[] {
  return weights.map(w => ({ name: w.originalName, shape: [...w.shape] as number[] }));
}

/** Lays out variables (given in model order) in transmission order, as one group per `splits`. */
export function layoutParameters(weights: { name: string; shape: number[] }[]): ParameterLayout {
  const variables: ParameterSpec[] = [];
  let offset = 0;
  for (let i = weights.length - 1; i >= 0; i--) {
    const { name, shape } = weights[i];
    const size = shape.reduce((a, b) => a * b, 1);
    const cut = name.lastIndexOf('/');
    variables.push({
      name,
      shape: [...shape],
      size,
      offset,
      modelIndex: i,
      layer: cut > 0 ? name.slice(0, cut) : name,
    });
    offset += size;
  }
  return { variables, total: offset, groups: [{ name: 'all', start: 0, end: offset }] };
}

/** The layers of a layout in transmission order (output layer first). */
export function layersOf(layout: ParameterLayout): LayerRange[] {
  const layers: LayerRange[] = [];
  layout.variables.forEach((v, i) => {
    const last = layers[layers.length - 1];
    if (last && last.name === v.layer) {
      last.end = v.offset + v.size;
      last.variables.push(i);
      last.fullyConnected ||= v.shape.length === 2;
    } else {
      layers.push({
        name: v.layer,
        start: v.offset,
        end: v.offset + v.size,
        variables: [i],
        fullyConnected: v.shape.length === 2,
      });
    }
  });
  return layers;
}
