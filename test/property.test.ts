// Property: any configuration either trains or fails with a TandemError —
// never a hang, a crash, an unhandled rejection, or a thread left behind.
import t from 'tap';
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { train, TandemError, type TrainConfig } from '../src/index.js';

function osThreads(): number {
  return Number(/Threads:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]);
}

/** Mostly valid values, sometimes a bad one, so that whole configs are often valid. */
function mostly<T>(valid: fc.Arbitrary<T>, invalid: fc.Arbitrary<T>): fc.Arbitrary<T> {
  return fc.oneof({ weight: 12, arbitrary: valid }, { weight: 1, arbitrary: invalid });
}

const config = fc.record(
  {
    model: mostly(
      fc.constantFrom('mlp', 'alexnet-mini', 'convnet-gap'),
      fc.constantFrom('alexnet', 'resnet', './no-such-model.mjs'),
    ),
    data: mostly(fc.constant('synthetic-images'), fc.constantFrom('mnist', 'imagenet')),
    devices: mostly(fc.integer({ min: 1, max: 3 }), fc.constantFrom(0, -1, 65)),
    batch: mostly(fc.constantFrom(6, 12, 24), fc.integer({ min: 0, max: 40 })),
    steps: mostly(fc.integer({ min: 1, max: 2 }), fc.constant(0)),
    lr: mostly(fc.double({ min: 1e-4, max: 0.5, noNaN: true }), fc.constantFrom(-1, NaN, Infinity)),
    optimizer: mostly(fc.constantFrom('sgd', 'adam'), fc.constant('nadam')),
    strategy: mostly(fc.constantFrom('sequential', 'two-group', 'per-layer', 'buckets'), fc.constant('sideways')),
    method: fc.constantFrom('data-parallel', 'data-parallel', 'local-head', 'partial-fc'),
    classes: mostly(fc.integer({ min: 3, max: 12 }), fc.constantFrom(1, 0)),
    imageSize: mostly<number[]>(fc.constant([8, 8, 1]), fc.constantFrom([8, 8], [2, 2, 1], [0, 4])),
    datasetSize: mostly(fc.integer({ min: 60, max: 200 }), fc.integer({ min: 0, max: 10 })),
    backend: mostly(fc.constantFrom('cpu', 'wasm'), fc.constant('webgpu')),
    allReduce: fc.constantFrom('sharded', 'primary'),
  },
  { requiredKeys: [] },
);

t.test('random configurations: trained, or a TandemError; nothing else', async t => {
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  await train({
    model: 'mlp',
    data: 'synthetic-images',
    imageSize: [8, 8, 1],
    datasetSize: 64,
    batch: 8,
    steps: 1,
    devices: 2,
    backend: 'cpu',
  });
  const baseline = osThreads();
  const outcomes = { trained: 0, refused: 0 };
  await fc.assert(
    fc.asyncProperty(config, async c => {
      const cfg = { ...c, stallTimeoutMs: 30_000 } as TrainConfig;
      if (cfg.method !== 'data-parallel' && cfg.data === 'mnist') cfg.classes = undefined;
      if (cfg.data === 'mnist') {
        delete cfg.imageSize;
        delete cfg.datasetSize;
      }
      try {
        await train(cfg);
        outcomes.trained++;
      } catch (err) {
        if (!(err instanceof TandemError))
          throw new Error(`not a TandemError for ${JSON.stringify(cfg)}: ${String(err)}`);
        outcomes.refused++;
      }
    }),
    { numRuns: 10, seed: 20261129 },
  );
  await new Promise(r => setImmediate(r));
  process.off('unhandledRejection', onUnhandled);
  t.equal(unhandled.length, 0, 'no unhandled rejection');
  t.ok(osThreads() <= baseline, `no thread left behind (${osThreads()} <= ${baseline})`);
  t.ok(outcomes.trained > 0 && outcomes.refused > 0, `both outcomes seen: ${JSON.stringify(outcomes)}`);
});
