// The profiler's walk of a model: every leaf layer call in topological order, for Sequential, functional
// (residual), nested (a model used as a layer) and shared-layer models. Checked by running the walk: it must
// compute what the model computes. Then every layer timed alone on the real thread-CPU clock, on this thread.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { layerGraph, type LayerGraph } from '../src/profiling/layer-graph.js';
import { timeLayers } from '../src/profiling/time-layers.js';
import { layerClock } from '../src/profiling/layer-clock.js';
import { readFence } from '../src/profiling/read-fence.js';
import { BUILTIN_MODELS } from '../src/model/builtin-models.js';

const inputShape = [8, 8, 3];
const builtin = (name: string) =>
  BUILTIN_MODELS[name].factory(tf, { inputShape, classes: 5, seed: 3 }) as Promise<tf.LayersModel> | tf.LayersModel;

/** A small functional base model, used as a layer inside a Sequential (transfer learning). */
function nestedModel(): tf.LayersModel {
  const input = tf.input({ shape: inputShape });
  const conv = tf.layers
    .conv2d({ filters: 4, kernelSize: 3, padding: 'same', activation: 'relu' })
    .apply(input) as tf.SymbolicTensor;
  const base = tf.model({
    name: 'base',
    inputs: input,
    outputs: tf.layers.globalAveragePooling2d({}).apply(conv) as tf.SymbolicTensor,
  });
  return tf.sequential({ name: 'transfer', layers: [base, tf.layers.dense({ units: 5, name: 'head' })] });
}

/** One Dense layer applied twice (two inbound nodes), joined by an Add. */
function sharedLayerModel(): tf.LayersModel {
  const input = tf.input({ shape: [6] });
  const shared = tf.layers.dense({ units: 6, activation: 'tanh', name: 'shared' });
  const once = shared.apply(input) as tf.SymbolicTensor;
  const twice = shared.apply(once) as tf.SymbolicTensor;
  const sum = tf.layers.add({ name: 'join' }).apply([once, twice]) as tf.SymbolicTensor;
  return tf.model({
    name: 'shared_twice',
    inputs: input,
    outputs: tf.layers.dense({ units: 3, name: 'out' }).apply(sum) as tf.SymbolicTensor,
  });
}

/** Runs the walk as the profiler does (inference mode here, to compare with predict). */
function runWalk(graph: LayerGraph, x: tf.Tensor): tf.Tensor {
  const values = new Map<string, tf.Tensor>([[graph.input, x]]);
  for (const call of graph.calls) {
    const ins = call.inputs.map(k => values.get(k)!);
    const out = call.layer.apply(ins.length === 1 ? ins[0] : ins) as tf.Tensor | tf.Tensor[];
    (Array.isArray(out) ? out : [out]).forEach((o, i) => values.set(call.outputs[i], o));
  }
  return values.get(graph.output)!;
}

type Assert = Pick<typeof t, 'ok' | 'same' | 'equal'>;

function checkGraph(t: Assert, model: tf.LayersModel, x: tf.Tensor) {
  const graph = layerGraph(tf, model);
  const produced = new Set([graph.input]);
  const early = graph.calls.filter(call => {
    const ready = call.inputs.every(k => produced.has(k));
    call.outputs.forEach(k => produced.add(k));
    return !ready;
  });
  t.same(
    early.map(c => c.layer.name),
    [],
    `${model.name}: every call reads only tensors produced before it (${graph.calls.length} calls)`,
  );
  t.ok(produced.has(graph.output), `${model.name}: the output is produced`);
  const called = new Set(graph.calls.map(c => c.layer));
  t.ok(
    graph.layers.every(l => called.has(l)) && [...called].every(l => graph.layers.includes(l)),
    `${model.name}: every leaf layer is called, and only those`,
  );
  t.same(
    graph.layers.flatMap(l => l.trainableWeights.map(w => w.name)),
    model.trainableWeights.map(w => w.name),
    `${model.name}: layers in the order of model.trainableWeights (the layout's order, reversed)`,
  );
  const walked = runWalk(graph, x),
    predicted = model.predict(x) as tf.Tensor;
  const diff = tf.max(tf.abs(tf.sub(walked, predicted))).dataSync()[0];
  t.equal(diff, 0, `${model.name}: the walk computes what the model computes (max |difference| ${diff})`);
  return graph;
}

t.test(
  'Sequential, functional residual, nested and shared-layer models: every layer, topological order, same output',
  async t => {
    const image = tf.randomUniform([2, ...inputShape], 0, 1, 'float32', 5);
    checkGraph(t, await builtin('alexnet-mini'), image);
    const resnet = checkGraph(t, await builtin('resnet-mini'), image);
    t.ok(
      resnet.calls.some(c => c.inputs.length === 2),
      'resnet-mini: the residual Add reads two tensors',
    );
    const nested = checkGraph(t, nestedModel(), image);
    t.same(
      nested.calls.map(c => c.layer.getClassName()),
      ['Conv2D', 'GlobalAveragePooling2D', 'Dense'],
      'the nested model is inlined: its own layers are walked',
    );
    const shared = checkGraph(t, sharedLayerModel(), tf.randomUniform([2, 6], -1, 1, 'float32', 6));
    t.equal(
      shared.calls.filter(c => c.layer.name === 'shared').length,
      2,
      'a shared layer is called once per inbound node',
    );
    t.equal(shared.layers.filter(l => l.name === 'shared').length, 1, 'and listed once');
  },
);

t.test('a model with two inputs is refused by name', async t => {
  const a = tf.input({ shape: [3] }),
    b = tf.input({ shape: [3] });
  const model = tf.model({
    name: 'two_inputs',
    inputs: [a, b],
    outputs: tf.layers.concatenate().apply([a, b]) as tf.SymbolicTensor,
  });
  t.throws(() => layerGraph(tf, model), { code: 'BAD_CONFIG', message: /one input; model 'two_inputs' has 2/ });
});

t.test('every layer timed alone on the thread-CPU clock: each present, a shared layer counted per call', async t => {
  const clock = layerClock('calling-thread'); // tfjs's cpu backend computes on this thread
  t.teardown(() => clock.close());
  if (process.platform === 'linux') t.equal(clock.kind, 'thread-cpu', clock.reason);
  const model = sharedLayerModel();
  const graph = layerGraph(tf, model);
  const costs = await timeLayers(tf, graph, tf.randomUniform([64, 6], -1, 1, 'float32', 7), clock, 3, readFence(true));
  t.same(
    costs.map(c => c.name),
    ['shared', 'join', 'out'],
    'model order',
  );
  t.same(
    costs.map(c => c.parameters),
    [42, 0, 21],
    'parameters per layer (the shared one once)',
  );
  t.equal(costs[0].outputSize, 2 * 64 * 6, "the shared layer's output counted for both calls");
  t.ok(
    costs.every(c => c.forwardMs >= 0 && c.backwardMs >= 0 && Number.isFinite(c.forwardMs + c.backwardMs)),
    'finite, non-negative times',
  );
  t.ok(costs[0].forwardMs + costs[0].backwardMs > 0, 'the shared Dense takes measurable time');
});
