// Every strategy gives exactly the parameters `sequential` gives (only the
// schedule changes; the strategies with per-group forward waits, sequential
// waiting for the whole step); overlap really happens with two-group on a slow
// (emulated) link and never with sequential; user strategies run through the API; every exchange's span
// reaches the caller before the run ends.
import t from 'tap';
import {
  train,
  startTraining,
  twoGroups,
  bucketRange,
  defaultSplitLayer,
  layoutParameters,
  exchangeGroups,
  type CustomStrategy,
  type TrainConfig,
  type Span,
} from '../src/index.js';

const base: TrainConfig = {
  model: 'alexnet-mini',
  data: 'synthetic-images',
  imageSize: [12, 12, 3],
  classes: 5,
  datasetSize: 240,
  batch: 12,
  steps: 2,
  backend: 'cpu',
  optimizer: 'adam',
  lr: 0.01,
  seed: 5,
};

const fcThenBuckets: CustomStrategy = {
  name: 'fc-then-buckets',
  groups: layout => {
    const [fc, rest] = twoGroups(layout, defaultSplitLayer(layout));
    return [fc, ...bucketRange(layout, rest.start, rest.end, 16 * 1024, 4 * 1024)];
  },
};

/**
 * Which (device, step) pairs lack one of the run's exchange spans: every group's exchange of every step is reported.
 */
function missingExchanges(spans: Span[], devices: number, steps: number, groups: number): string[] {
  const missing: string[] = [];
  for (let device = 0; device < devices; device++) {
    for (let step = 1; step <= steps; step++) {
      const n = spans.filter(s => s.kind === 'exchange' && s.device === device && s.step === step).length;
      if (n !== groups) missing.push(`device ${device} step ${step}: ${n}/${groups}`);
    }
  }
  return missing;
}

t.test(
  'every strategy = sequential, bit for bit, on 1-3 devices; every exchange span reported before the run ends',
  async t => {
    // The reference waits for the whole update before forward (forwardWait 'step'); the strategies run with the
    // default per-group waits inside forward (forward-waits.test.ts): the same bits.
    // Every strategy on 2 devices; on 1 and 3 devices the two-group split and a many-group one (the suite's time).
    // 2 steps: the second step's forward waits on the first step's per-group updates.
    // The same runs check that the spans of every exchange of every step, the last included, arrive before `train`
    // resolves: the comm thread marks a group applied before it posts its report, on another port than compute's, and
    // the last step's report used to arrive after the run ended (and was lost) now and then (6 multi-device runs here).
    const strategies = {
      1: ['two-group', fcThenBuckets],
      2: ['two-group', 'per-layer', 'buckets', fcThenBuckets],
      3: ['two-group', 'buckets'],
    } as const;
    for (const devices of [1, 2, 3] as const) {
      const seq = await train({ ...base, devices, strategy: 'sequential', forwardWait: 'step' });
      for (const strategy of strategies[devices]) {
        const spans: Span[] = [];
        const run = await train(
          {
            ...base,
            devices,
            strategy,
            ...(strategy === 'buckets' ? { bucketCapMB: 0.02, firstBucketMB: 0.005 } : {}),
          },
          {
            onSpans: s => {
              spans.push(...s);
            },
          },
        );
        const name = typeof strategy === 'string' ? strategy : strategy.name;
        t.ok(run.strategy.groups.length > 1, `${name}: ${run.strategy.groups.length} groups`);
        let same = true;
        run.weights.forEach((w, i) =>
          w.values.forEach((v, j) => {
            if (v !== seq.weights[i].values[j]) same = false;
          }),
        );
        t.ok(same, `${devices} device(s), ${name}: parameters identical to sequential`);
        if (devices > 1)
          t.same(
            missingExchanges(spans, devices, base.steps!, run.strategy.groups.length),
            [],
            `${devices} devices, ${name}: ${run.strategy.groups.length} exchange spans per device and step`,
          );
      }
    }
  },
);

function overlaps(
  spans: Span[],
  devices: number,
  step: number,
): { device: number; fcExchangeStart: number; convBackwardEnd: number }[] {
  return Array.from({ length: devices }, (_, device) => {
    const mine = spans.filter(s => s.device === device && s.step === step);
    const ex = mine.filter(s => s.kind === 'exchange').sort((a, b) => a.start - b.start)[0];
    const bw = mine.filter(s => s.kind === 'backward' && s.group !== undefined).sort((a, b) => b.end - a.end)[0];
    return { device, fcExchangeStart: ex.start, convBackwardEnd: bw.end };
  });
}

t.test(
  'two-group on an emulated slow link: the FC exchange starts while conv backward still runs; never with sequential',
  async t => {
    const cfg: TrainConfig = {
      ...base,
      backend: 'wasm',
      imageSize: [24, 24, 3],
      batch: 16,
      steps: 3,
      devices: 2,
      link: '200mbps',
    };
    for (const strategy of ['two-group', 'sequential'] as const) {
      const spans: Span[] = [];
      const run = startTraining({ ...cfg, strategy });
      run.timeline$.subscribe(s => spans.push(s));
      const summary = await run.done;
      t.equal(summary.link?.emulated, true, 'summary labels the link as emulated');
      for (let step = 1; step <= cfg.steps!; step++) {
        for (const o of overlaps(spans, 2, step)) {
          const lead = o.convBackwardEnd - o.fcExchangeStart;
          if (strategy === 'two-group')
            t.ok(
              lead > 0,
              `two-group step ${step} device ${o.device}: FC exchange began ${lead.toFixed(1)} ms before conv ` +
                `backward ended`,
            );
          else
            t.ok(
              lead <= 0,
              `sequential step ${step} device ${o.device}: exchange began ${(-lead).toFixed(1)} ms after backward ` +
                `ended`,
            );
        }
      }
    }
  },
);

t.test('bad custom strategies are refused with the reason', async t => {
  const layout = layoutParameters([
    { name: 'd/kernel', shape: [4, 3] },
    { name: 'd/bias', shape: [3] },
  ]);
  t.throws(
    () =>
      exchangeGroups(
        {
          name: 'gap',
          groups: () => [
            { name: 'a', start: 0, end: 5 },
            { name: 'b', start: 6, end: 15 },
          ],
        },
        layout,
        { bucketCapMB: 1, firstBucketMB: 1 },
      ),
    { code: 'BAD_CONFIG', message: /contiguous/ },
  );
  t.throws(
    () =>
      exchangeGroups({ name: 'short', groups: () => [{ name: 'a', start: 0, end: 5 }] }, layout, {
        bucketCapMB: 1,
        firstBucketMB: 1,
      }),
    { message: /cover \[0, 5\) but the model has 15/ },
  );
  t.throws(() => exchangeGroups('two-group', layout, { splitLayer: 3, bucketCapMB: 1, firstBucketMB: 1 }), {
    message: /p=3 is out of range/,
  });
  t.same(
    exchangeGroups('buckets', layout, { bucketCapMB: 12 / 2 ** 20, firstBucketMB: 12 / 2 ** 20 }).map(g => [
      g.start,
      g.end,
    ]),
    [
      [0, 3],
      [3, 15],
    ],
    'buckets close at variable boundaries once full',
  );
});
