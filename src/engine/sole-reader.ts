/**
 * Where a fusion may take a layer's work into the layer before it: the one layer that reads that layer's output.
 * Shared by the native engine's convolution → pool fusion (native/fused-pool-layers.ts) and BatchNormalization →
 * relu (model/sync-batch-norm.ts).
 */

/** The parts of tfjs-layers' Layer and Node the question reads (protected in tfjs's typings). */
export interface GraphNodeLike<L> {
  outboundLayer: L;
  inboundLayers: L[];
}

export interface GraphLayerLike<L> {
  layers?: L[];
  outputLayers?: L[];
  inboundNodes: GraphNodeLike<L>[];
  outboundNodes: GraphNodeLike<L>[];
}

/**
 * The layer that alone reads `layer`'s output, or undefined: `layer` has one outbound node and is not an output of
 * `container` (the model whose `layers` hold it); the reader is one of `container`'s layers, called once, with
 * `layer` as its only input.
 */
export function soleReader<L extends GraphLayerLike<L>>(layer: L, container: L): L | undefined {
  if (layer.outboundNodes.length !== 1 || container.outputLayers?.includes(layer)) return undefined;
  const next = layer.outboundNodes[0].outboundLayer;
  const inbound = next.inboundNodes;
  if (inbound.length !== 1 || inbound[0].inboundLayers.length !== 1 || inbound[0].inboundLayers[0] !== layer)
    return undefined;
  return container.layers?.includes(next) ? next : undefined;
}
