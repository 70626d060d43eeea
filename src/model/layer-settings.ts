/**
 * A model's layers as the hosts of a run compare them (host-flags.ts' modelFlags): each layer's class and settings,
 * without what may differ between processes and changes nothing a step computes — its name (tfjs numbers layers per
 * process) and its initializers (host 0's weights reach every replica before step 1). A host whose model file gives
 * another dropout rate, activation or regularizer has the same tensors and would otherwise train another model.
 */
import type { LayersModel } from '../engine/tfjs-types.js';

/** `Dropout {"rate":0.5,…}`, one a layer, in the model's order. */
export function layerSettings(model: Pick<LayersModel, 'layers'>): string[] {
  return model.layers.map(layer => `${layer.getClassName()} ${JSON.stringify(layer.getConfig(), withoutIdentity)}`);
}

function withoutIdentity(key: string, value: unknown): unknown {
  return key === 'name' || key.endsWith('Initializer') ? undefined : value;
}
