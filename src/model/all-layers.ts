/**
 * Every layer of a model, the inner ones included: nested models' layers and wrappers' layers (TimeDistributed,
 * Bidirectional).
 */

interface Nested<L> {
  layers?: L[];
  /** A wrapper's layer (TimeDistributed; Bidirectional's forward one). */
  layer?: L;
  forwardLayer?: L;
  backwardLayer?: L;
}

/** Every layer under `top`, inner ones before the layer holding them, each once. */
export function allLayers<L extends Nested<L>>(top: L[]): L[] {
  const seen = new Set<L>();
  const visit = (layer: L | undefined) => {
    if (!layer || seen.has(layer)) return;
    for (const inner of [...(layer.layers ?? []), layer.layer, layer.forwardLayer, layer.backwardLayer]) visit(inner);
    seen.add(layer);
  };
  top.forEach(visit);
  return [...seen];
}
