// Per-group forward waits (forwardWait 'group', the default). The gate on a real tfjs model (a nested Sequential inside
// a functional model, one group per layer): it waits for the groups in forward order, each just before its layer,
// and the forward it gates computes the bits of a forward whose weights were all written first. In a run (alexnet-mini,
// two-group, 2 devices, an EMULATED 100 Mbps link): every compute 'wait' span of step s+1 ends after the comm thread
// applied that group of step s, and the forward piece that follows it starts no earlier. Bits against sequential on
// 1–3 devices: strategies.test.ts; across 2 hosts: hosts-strategies.test.ts. With --exchange-order priority (the conv
// group overtakes the FC group), the next step's conv forward starts while the FC group is still being exchanged.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { ForwardGate, wrapLayerCalls } from '../src/actors/forward-gate.js';
import { layoutParameters } from '../src/model/parameter-layout.js';
import { perLayerGroups } from '../src/pipeline/strategy.js';
import { startTraining, type Span, type TrainConfig } from '../src/index.js';

function nestedModel(): tf.LayersModel {
  const base = tf.sequential({
    layers: [
      tf.layers.dense({ inputShape: [6], units: 5, activation: 'relu' }),
      tf.layers.dense({ units: 4, activation: 'relu' }),
    ],
  });
  const input = tf.input({ shape: [6] });
  const hidden = base.apply(input) as tf.SymbolicTensor;
  const out = tf.layers
    .dense({ units: 3 })
    .apply(tf.layers.dropout({ rate: 0 }).apply(hidden) as tf.SymbolicTensor) as tf.SymbolicTensor;
  return tf.model({ inputs: input, outputs: out });
}

t.test(
  'the gate waits in forward order, just before each layer, and forward computes the bits of weights written first',
  async t => {
    await tf.setBackend('cpu');
    const model = nestedModel();
    const layout = layoutParameters(
      model.trainableWeights.map(w => ({ name: w.originalName, shape: [...w.shape] as number[] })),
    );
    const groups = perLayerGroups(layout);
    // "the update": not the initial weights
    const slot = Float32Array.from({ length: layout.total }, (_, i) => Math.sin(i + 1) / 2);
    const byModelIndex: number[] = [];
    layout.variables.forEach((v, i) => {
      byModelIndex[v.modelIndex] = i;
    });
    const x = tf.tensor2d(
      Array.from({ length: 4 * 6 }, (_, i) => Math.cos(i)),
      [4, 6],
    );

    // Expected: every weight written from the slot, then forward.
    const initial = model.getWeights().map(w => w.clone());
    layout.variables.forEach(v =>
      model.trainableWeights[v.modelIndex].write(tf.tensor(slot.subarray(v.offset, v.offset + v.size), v.shape)),
    );
    const expected = (model.apply(x, { training: true }) as tf.Tensor).dataSync().slice();
    model.setWeights(initial); // back to the initial weights: the gate must write every one before it is read

    const events: string[] = [];
    // eslint-disable-next-line prefer-const -- read by the closure above before it is set
    let gate: ForwardGate | undefined;
    const owned = wrapLayerCalls(model, byModelIndex, () => gate!);
    t.equal(owned.size, layout.variables.length, 'every variable is owned by a wrapped layer');
    gate = new ForwardGate(layout, groups, owned, {
      waitGroup: g => {
        events.push(`wait ${groups[g].name}`);
        return true;
      },
      writeVariable: i => {
        const v = layout.variables[i];
        model.trainableWeights[v.modelIndex].write(tf.tensor(slot.subarray(v.offset, v.offset + v.size), v.shape));
      },
      waited: (g, _start, _end, layer) => events.push(`before ${layer}`),
    });
    gate.arm(1);
    const got = (model.apply(x, { training: true }) as tf.Tensor).dataSync();
    gate.settle();
    const forwardOrder = [...groups].reverse().map(g => g.name); // transmission order is output first
    t.same(
      events,
      forwardOrder.flatMap(name => [`wait ${name}`, `before ${name}`]),
      `groups waited in forward order: ${forwardOrder.join(', ')}`,
    );
    t.same(
      Array.from(got),
      Array.from(expected),
      'gated forward = forward with every weight written first, bit for bit',
    );
    events.length = 0;
    gate.settle();
    model.apply(x, { training: true });
    t.same(events, [], 'a settled gate waits for nothing more');
  },
);

t.test(
  'a run: each forward wait of step s+1 ends after its group of step s was applied (EMULATED 100 Mbps link)',
  async t => {
    const cfg: TrainConfig = {
      model: 'alexnet-mini',
      data: 'synthetic-images',
      imageSize: [24, 24, 3],
      classes: 5,
      datasetSize: 240,
      batch: 16,
      steps: 3,
      backend: 'wasm',
      optimizer: 'sgd',
      lr: 0.01,
      seed: 5,
      devices: 2,
      link: '100mbps',
      strategy: 'two-group',
    };
    const spans: Span[] = [];
    const run = startTraining(cfg);
    run.timeline$.subscribe(s => spans.push(s));
    const summary = await run.done;
    t.equal(summary.link?.emulated, true, 'the link is emulated');
    let waits = 0;
    for (const w of spans.filter(s => s.kind === 'wait' && s.thread === 'compute' && s.step > 1)) {
      const applied = spans.find(
        s => s.kind === 'apply' && s.device === w.device && s.step === w.step - 1 && s.group === w.group,
      )!;
      const next = spans
        .filter(s => s.kind === 'forward' && s.device === w.device && s.step === w.step && s.start >= w.start)
        .sort((a, b) => a.start - b.start)[0];
      t.ok(
        applied && w.end >= applied.end,
        `${w.name}, device ${w.device} step ${w.step}: ends after ${applied?.name} of step ${w.step - 1}`,
      );
      t.ok(next && next.start >= applied.end, `the forward after it starts after that apply`);
      waits++;
    }
    t.ok(waits >= 2, `${waits} forward waits that blocked, as spans`);
  },
);

t.test(
  "with the priority exchange order, the next step's first (conv) forward starts before the FC group's exchange has " +
    'ended (EMULATED 20 Mbps link)',
  async t => {
    const cfg: TrainConfig = {
      model: 'alexnet-mini',
      data: 'synthetic-images',
      imageSize: [24, 24, 3],
      classes: 5,
      datasetSize: 240,
      batch: 16,
      steps: 4,
      backend: 'wasm',
      optimizer: 'sgd',
      lr: 0.01,
      seed: 5,
      devices: 2,
      link: '20mbps',
      strategy: 'two-group',
      exchangeOrder: 'priority',
      chunkFloats: 1 << 15,
    };
    const spans: Span[] = [];
    const run = startTraining(cfg);
    run.timeline$.subscribe(s => spans.push(s));
    await run.done;
    for (const device of [0, 1]) {
      for (const step of [2, 3]) {
        // step 1 compiles kernels
        const fcEnd = Math.max(
          ...spans
            .filter(s => s.kind === 'exchange' && s.device === device && s.step === step && /\bfc\b/.test(s.name))
            .map(s => s.end),
        );
        const firstForward = spans
          .filter(s => s.kind === 'forward' && s.thread === 'compute' && s.device === device && s.step === step + 1)
          .sort((a, b) => a.start - b.start)[0];
        t.ok(
          firstForward && firstForward.start < fcEnd,
          `device ${device}: step ${step + 1}'s first forward (${firstForward?.name}) starts at ` +
            `${firstForward?.start.toFixed(1)} ms, before step ${step}'s FC exchange ends at ${fcEnd.toFixed(1)} ms`,
        );
      }
    }
  },
);
