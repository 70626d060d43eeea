/**
 * A layers model as the profiler walks it: every call of a leaf layer in
 * topological order, each reading tensors that the model input or earlier
 * calls produced. Sequential models are a chain; functional (tf.model) models
 * follow their graph (nodes by depth, deepest first, as tfjs executes them);
 * a nested model (a LayersModel used as a layer, e.g. a base model inside a
 * transfer-learning Sequential) is inlined, so its own layers are timed; a
 * layer called more than once (a shared layer) appears once per call.
 *
 * @example
 * const graph = layerGraph(tf, model);
 * for (const call of graph.calls) call.layer.apply(call.inputs.map(k => values.get(k)), { training: true });
 */
import { TandemError } from '../errors.js';
import type { LayersModel, Tf } from '../engine/tfjs-types.js';

export type Layer = LayersModel['layers'][number];

/** One call of a leaf layer; tensors are named by keys of the walk (the model input is `LayerGraph.input`). */
export interface LayerCall {
  layer: Layer;
  inputs: string[];
  outputs: string[];
}

export interface LayerGraph {
  input: string;
  /** Key of the model's (first) output. */
  output: string;
  /** Calls in an order where every input was produced before (topological). */
  calls: LayerCall[];
  /** Leaf layers in model order (nested models expanded): the order of `model.trainableWeights`. */
  layers: Layer[];
}

interface SymbolicLike {
  id: number;
}
interface NodeLike {
  outboundLayer: Layer;
  inputTensors: SymbolicLike[];
  outputTensors: SymbolicLike[];
}
interface FunctionalLike {
  inputs: SymbolicLike[];
  outputs: SymbolicLike[];
  nodesByDepth: Record<string, NodeLike[]>;
}

const INPUT = 'input';

export function layerGraph(tf: Tf, model: LayersModel): LayerGraph {
  if (model.inputs.length !== 1) {
    throw new TandemError(
      'BAD_CONFIG',
      `the profiler feeds one input; model '${model.name}' has ${model.inputs.length} (${model.inputNames.join(', ')})`,
    );
  }
  const calls: LayerCall[] = [];
  let scopes = 0;
  const inline = (container: LayersModel, inputs: string[]): string[] => {
    const scope = `${container.name}#${scopes++}`;
    if (container instanceof tf.Sequential) {
      let keys = inputs;
      container.layers.forEach((layer, i) => {
        keys = call(layer, keys, [`${scope}/${i}`]);
      });
      return keys;
    }
    const graph = container as unknown as FunctionalLike;
    const key = (t: SymbolicLike) => `${scope}/${t.id}`;
    const produced = new Map<string, string>(graph.inputs.map((t, i) => [key(t), inputs[i]]));
    const depths = Object.keys(graph.nodesByDepth)
      .map(Number)
      .sort((a, b) => b - a);
    for (const node of depths.flatMap(d => graph.nodesByDepth[d])) {
      if (node.outboundLayer.getClassName() === 'InputLayer') continue;
      const ins = node.inputTensors.map(
        t => produced.get(key(t)) ?? unordered(`layer '${node.outboundLayer.name}'`, container),
      );
      const outs = call(node.outboundLayer, ins, node.outputTensors.map(key));
      node.outputTensors.forEach((t, i) => produced.set(key(t), outs[i]));
    }
    return graph.outputs.map(t => produced.get(key(t)) ?? unordered('its output', container));
  };
  const call = (layer: Layer, inputs: string[], outputs: string[]): string[] => {
    if (layer instanceof tf.LayersModel) return inline(layer, inputs);
    calls.push({ layer, inputs, outputs });
    return outputs;
  };
  const [output] = inline(model, [INPUT]);
  return { input: INPUT, output, calls, layers: leafLayers(tf, model) };
}

function leafLayers(tf: Tf, model: LayersModel): Layer[] {
  return model.layers.flatMap(layer =>
    layer instanceof tf.LayersModel ? leafLayers(tf, layer) : layer.getClassName() === 'InputLayer' ? [] : [layer],
  );
}

function unordered(what: string, container: LayersModel): never {
  throw new TandemError(
    'BAD_CONFIG',
    `the profiler cannot order ${what} in model '${container.name}': ` +
      'a tensor it reads is produced by no earlier layer of the graph',
  );
}
