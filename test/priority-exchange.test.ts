// Priority exchange (exchangeOrder 'priority'): chunked all-reduces, a higher-priority group overtaking in flight.
// Parameters are those of sequential bit for bit on 2 and 3 devices (a group smaller than one chunk, a chunk size that
// does not divide the groups); on an EMULATED slow link the small conv group, ready last, finishes its exchange before
// the large FC group does (and never with the ready order); chunks are cut as documented; bad options are refused.
import t from 'tap';
import { train, startTraining, chunksOf, type TrainConfig, type Span } from '../src/index.js';

const base: TrainConfig = {
  model: 'alexnet-mini',
  data: 'synthetic-images',
  imageSize: [12, 12, 3],
  classes: 5,
  datasetSize: 240,
  batch: 12,
  steps: 3,
  backend: 'cpu',
  optimizer: 'adam',
  lr: 0.01,
  seed: 5,
};

t.test('chunksOf cuts a group into chunks of at most chunkFloats, the rest last', async t => {
  t.same(
    chunksOf({ name: 'g', start: 10, end: 17 }, 3).map(c => [c.index, c.count, c.start, c.end]),
    [
      [0, 3, 10, 13],
      [1, 3, 13, 16],
      [2, 3, 16, 17],
    ],
  );
  t.same(
    chunksOf({ name: 'g', start: 0, end: 5 }, 100).map(c => [c.start, c.end]),
    [[0, 5]],
    'smaller than a chunk: one chunk',
  );
  t.same(
    chunksOf({ name: 'g', start: 0, end: 6 }, 3).map(c => [c.start, c.end]),
    [
      [0, 3],
      [3, 6],
    ],
  );
});

t.test('priority exchange = sequential, bit for bit, on 2 and 3 devices', async t => {
  const mlp: TrainConfig = {
    model: 'mlp',
    data: 'synthetic-images',
    imageSize: [8, 8, 1],
    classes: 4,
    datasetSize: 64,
    batch: 12,
    steps: 3,
    backend: 'cpu',
    optimizer: 'adam',
    lr: 0.01,
    seed: 7,
  };
  for (const devices of [2, 3]) {
    const seq = await train({ ...mlp, devices, strategy: 'sequential' });
    // Chunks of 997 floats: divide no group; per-layer has a group below one chunk (the output layer, 260) and groups
    // above.
    // Both strategies on 2 devices, per-layer (both kinds of group) on 3 (the suite's time).
    for (const strategy of devices === 2 ? (['two-group', 'per-layer'] as const) : (['per-layer'] as const)) {
      const chunkFloats = 997;
      const run = await train({ ...mlp, devices, strategy, exchangeOrder: 'priority', chunkFloats });
      const sizes = run.strategy.groups.map(g => g.parameters);
      t.ok(
        sizes.every(n => n % chunkFloats !== 0) && sizes.some(n => n > chunkFloats),
        `${strategy}: chunks of ${chunkFloats} divide none of ${sizes.join(', ')}`,
      );
      if (strategy === 'per-layer')
        t.ok(
          sizes.some(n => n < chunkFloats),
          'per-layer: a group smaller than one chunk',
        );
      let same = true;
      run.weights.forEach((w, i) =>
        w.values.forEach((v, j) => {
          if (!Object.is(v, seq.weights[i].values[j])) same = false;
        }),
      );
      t.ok(same, `${devices} devices, ${strategy}, chunks of ${chunkFloats}: parameters identical to sequential`);
    }
  }
});

/** Per device and step: when the FC group's (group 0) and the conv group's (group 1) last exchange spans end. */
function exchangeEnds(
  spans: Span[],
  devices: number,
  steps: number,
): {
  device: number;
  step: number;
  fcStart: number;
  convStart: number;
  fcEnd: number;
  convEnd: number;
  fcChunks: number;
}[] {
  const out = [];
  for (let device = 0; device < devices; device++) {
    for (let step = 1; step <= steps; step++) {
      const ex = spans.filter(s => s.device === device && s.step === step && s.kind === 'exchange');
      const end = (g: number) => Math.max(...ex.filter(s => s.group === g).map(s => s.end));
      const start = (g: number) => Math.min(...ex.filter(s => s.group === g).map(s => s.start));
      out.push({
        device,
        step,
        fcStart: start(0),
        convStart: start(1),
        fcEnd: end(0),
        convEnd: end(1),
        fcChunks: ex.filter(s => s.group === 0).length,
      });
    }
  }
  return out;
}

t.test(
  'EMULATED slow link, two-group: the conv group overtakes the FC group in flight (priority), never (ready order)',
  async t => {
    // The FC group (~300k floats) in 19 chunks of 16k at 20 Mbit/s: ~480 ms of wire time; the conv group becomes ready
    // during
    // it. Step 1 is not judged: its backward compiles the kernels (the conv group may be ready only after the FC
    // exchange).
    const cfg: TrainConfig = {
      ...base,
      backend: 'wasm',
      imageSize: [24, 24, 3],
      batch: 16,
      steps: 3,
      devices: 2,
      strategy: 'two-group',
      link: '20mbps',
    };
    for (const order of ['priority', 'ready'] as const) {
      const spans: Span[] = [];
      const run = startTraining({
        ...cfg,
        exchangeOrder: order,
        chunkFloats: order === 'priority' ? 16_384 : undefined,
      });
      run.timeline$.subscribe(s => spans.push(s));
      const summary = await run.done;
      t.equal(summary.link?.emulated, true, 'summary labels the link as emulated');
      const [fc, conv] = summary.strategy.groups;
      t.ok(fc.parameters > 4 * conv.parameters, `FC group ${fc.parameters} floats, conv group ${conv.parameters}`);
      for (const e of exchangeEnds(spans, 2, 3).filter(e => e.step > 1)) {
        const lead = e.fcEnd - e.convEnd;
        if (order === 'priority') {
          t.ok(e.fcChunks > 1, `step ${e.step} device ${e.device}: the FC group went in ${e.fcChunks} chunks`);
          t.ok(
            e.fcStart < e.convStart && lead > 0,
            `priority, step ${e.step} device ${e.device}: the FC exchange began ` +
              `${(e.convStart - e.fcStart).toFixed(1)} ms ` +
              (`before the conv exchange, the conv exchange ended ${lead.toFixed(1)} ms before the FC exchange ` +
                `(overtaken in flight)`),
          );
        } else {
          t.ok(
            lead < 0,
            `ready order, step ${e.step} device ${e.device}: the conv exchange ended ${(-lead).toFixed(1)} ms after ` +
              `the FC exchange`,
          );
        }
      }
    }
  },
);

t.test('exchange options are checked', async t => {
  await t.rejects(train({ ...base, steps: 1, exchangeOrder: 'fastest' as never }), {
    code: 'BAD_CONFIG',
    message: /exchangeOrder/,
  });
  await t.rejects(train({ ...base, steps: 1, exchangeOrder: 'priority', chunkFloats: 0 }), {
    code: 'BAD_CONFIG',
    message: /chunkFloats/,
  });
  await t.rejects(train({ ...base, steps: 1, chunkFloats: 1000 }), {
    code: 'BAD_CONFIG',
    message: /chunkFloats.*priority/,
  });
});
