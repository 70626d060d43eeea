// A transport is one file: a toy second transport (MessagePorts, no shared memory) is loaded as a
// plugin through the registry, runs every collective on real worker threads, and trains 2 devices
// to the same parameters as the built-in shared-memory transport.
import t from 'tap';
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { train, resolveConfig, type TrainConfig } from '../src/index.js';
import { getTransport, registerTransport, transportNames } from '../src/collectives/transport-registry.js';
import { SHARED_MEMORY_TRANSPORT } from '../src/collectives/shared-memory-transport.js';
import { loadPlugins } from '../src/plugins/load-plugins.js';
import { loadGlooAddon } from '../src/collectives/gloo/gloo-addon.js';
import { loadShmAddon } from '../src/collectives/shm/shm-addon.js';

const plugin = fileURLToPath(new URL('./fixtures/message-port-transport.js', import.meta.url));
const pluginUrl = new URL('./fixtures/message-port-transport.js', import.meta.url).href;

/**
 * Every rank's slot of one buffer after `op` over `ranges`, through `transport` (registered slots for shared memory).
 */
async function collectiveRun(
  transport: string,
  size: number,
  length: number,
  ranges: [number, number][],
  op: string,
  fill: (r: number, i: number) => number,
) {
  const data = new SharedArrayBuffer(size * length * 4);
  const slots = Array.from({ length: size }, (_, r) => new Float32Array(data, r * length * 4, length));
  slots.forEach((s, r) =>
    s.forEach((_, i) => {
      s[i] = fill(r, i);
    }),
  );
  const { handles, transfer } = await getTransport(transport).prepare({
    name: 'test',
    size,
    registered: [{ buffer: data, slotFloats: length, slots: size }],
    stagingFloats: 1 << 16,
    options: { allReduce: 'sharded' },
  });
  const workers = handles.map(
    (handle, rank) =>
      new Worker(
        new URL('./fixtures/collective-worker.js', import.meta.url),
        // execArgv []: not tap's loader hooks (inherited otherwise), which make each worker's start several times
        // slower.
        {
          workerData: { handle, data, length, ranges, op, plugins: [pluginUrl] },
          transferList: transfer[rank],
          execArgv: [],
        },
      ),
  );
  const replies = await Promise.all(
    workers.map(async w => {
      const got: unknown[] = [];
      w.on('message', m => got.push(m));
      await once(w, 'exit');
      return got;
    }),
  );
  return { slots, replies };
}

t.before(() => loadPlugins([pluginUrl]));

const fill = (r: number, i: number) => Math.sin(r * 3.7 + i * 0.31) * (r + 1) * 1e3 + (i % 5 === 0 ? 1e-4 : 0);
const rangesOf = (op: string): [number, number][] =>
  op === 'allGather'
    ? [[3, 40]]
    : [
        [0, 0],
        [1, 4],
        [4, 1031],
      ];
/**
 * The shared-memory transport's result of `op` on 3 ranks: run once, the reference of both the message-port and the shm
 * tests.
 */
const sharedMemoryRuns = new Map<string, ReturnType<typeof collectiveRun>>();
function sharedMemoryRun(op: string): ReturnType<typeof collectiveRun> {
  let run = sharedMemoryRuns.get(op);
  if (!run) {
    run = collectiveRun('shared-memory', 3, 1031, rangesOf(op), op, fill);
    sharedMemoryRuns.set(op, run);
  }
  return run;
}

/** The training run both the shm and the message-port transports must equal (shared memory; run once). */
const trainBase: TrainConfig = {
  model: 'alexnet-mini',
  data: 'synthetic-images',
  imageSize: [12, 12, 3],
  classes: 5,
  datasetSize: 96,
  batch: 8,
  steps: 5,
  devices: 2,
  strategy: 'two-group',
  optimizer: 'adam',
  lr: 0.01,
  seed: 3,
};
let sharedMemoryTraining: ReturnType<typeof train> | undefined;
const sharedMemoryTrained = () => (sharedMemoryTraining ??= train(trainBase));

t.test(
  'the plugin registered its transport beside the built-in one; duplicates and unknown names are refused',
  async t => {
    const gloo = loadGlooAddon().loaded ? ['gloo', 'hierarchical'] : []; // built in when the Gloo addon was built
    const shm = loadShmAddon().loaded ? ['shm'] : []; // built in when the shm addon was built
    t.same(transportNames().sort(), [...gloo, 'message-port', 'shared-memory', ...shm].sort());
    t.throws(() => registerTransport(SHARED_MEMORY_TRANSPORT), { code: 'BAD_CONFIG', message: /already registered/ });
    await t.rejects(resolveConfig({ transport: 'carrier-pigeon' }), {
      code: 'BAD_CONFIG',
      message: /transport 'carrier-pigeon' is not registered \(registered: .*shared-memory/,
    });
  },
);

t.test(
  "message-port collectives give the shared-memory transport's bits: sum, mean, max, all-gather, broadcast",
  async t => {
    // 3 ranks (neither transport has a path of its own for 2; 2 devices train through it below; the suite's time).
    for (const size of [3]) {
      for (const op of ['sum', 'mean', 'max', 'broadcast', 'allGather'] as const) {
        const sm = await sharedMemoryRun(op);
        const mp = await collectiveRun('message-port', size, 1031, rangesOf(op), op, fill);
        if (op === 'allGather') {
          for (let r = 0; r < size; r++)
            t.same(mp.replies[r][0], sm.replies[r][0], `${size} ranks, all-gather: rank ${r} gathered the same`);
          const expect = Float32Array.from({ length: size * 37 }, (_, k) =>
            Math.fround(fill(Math.floor(k / 37), 3 + (k % 37))),
          );
          t.same(sm.replies[0][0], expect, `${size} ranks, all-gather: rank order, every part`);
          continue;
        }
        let identical = true;
        for (let r = 0; r < size; r++)
          for (let i = 0; i < 1031; i++) if (!Object.is(mp.slots[r][i], sm.slots[r][i])) identical = false;
        t.ok(identical, `${size} ranks, ${op}: every rank holds the shared-memory transport's bits`);
        if (op === 'sum' || op === 'max') {
          const i = 500;
          const want =
            op === 'max'
              ? Math.max(...Array.from({ length: size }, (_, r) => Math.fround(fill(r, i))))
              : Array.from({ length: size }, (_, r) => Math.fround(fill(r, i))).reduce((a, b) => Math.fround(a + b));
          t.equal(mp.slots[size - 1][i], want, `${size} ranks, ${op} of element ${i} computed by hand`);
        }
      }
    }
  },
);

t.test(
  "shm inside one process (its segment posted to worker threads) gives the shared-memory transport's bits; trains " +
    'to the same parameters',
  { skip: loadShmAddon().loaded ? false : 'the shm addon is not built' },
  async t => {
    for (const size of [3]) {
      // the processes' test (process-shm-transport.test.ts) runs every collective; here the threads' path, briefly
      for (const op of ['mean', 'max', 'allGather'] as const) {
        const sm = await sharedMemoryRun(op);
        const shm = await collectiveRun('shm', size, 1031, rangesOf(op), op, fill);
        if (op === 'allGather') {
          for (let r = 0; r < size; r++)
            t.same(shm.replies[r][0], sm.replies[r][0], `${size} ranks, all-gather: rank ${r} gathered the same`);
          continue;
        }
        let identical = true;
        for (let r = 0; r < size; r++)
          for (let i = 0; i < 1031; i++) if (!Object.is(shm.slots[r][i], sm.slots[r][i])) identical = false;
        t.ok(identical, `${size} ranks, ${op}: every rank holds the shared-memory transport's bits`);
      }
    }
    const [sm, shm] = [await sharedMemoryTrained(), await train({ ...trainBase, transport: 'shm' })];
    t.equal(shm.config.transport, 'shm');
    t.ok(
      sm.weights.every((w, k) => w.values.every((v, i) => Object.is(v, shm.weights[k].values[i]))),
      'bit-identical parameters',
    );
  },
);

t.test(
  '2 devices train through the message-port transport to the same parameters as through shared memory',
  async t => {
    const sm = await sharedMemoryTrained();
    const mp = await train({ ...trainBase, transport: 'message-port', plugins: [plugin] });
    t.equal(mp.config.transport, 'message-port');
    t.equal(sm.config.transport, 'shared-memory');
    let worst = 0,
      identical = true;
    sm.weights.forEach((w, k) =>
      w.values.forEach((v, i) => {
        const u = mp.weights[k].values[i];
        if (!Object.is(u, v)) identical = false;
        worst = Math.max(worst, Math.abs(u - v));
      }),
    );
    t.ok(identical, `bit-identical parameters (max |difference| ${worst})`);
    t.same(
      mp.history.map(h => h.loss),
      sm.history.map(h => h.loss),
      'the same losses every step',
    );
    t.ok(sm.weights.length > 0 && sm.history.length === 5, 'both runs trained');
  },
);

t.test(
  'a method that communicates inside backward is refused on a transport that cannot block, before any thread starts',
  async t => {
    await t.rejects(
      resolveConfig({
        model: 'mlp',
        data: 'synthetic-images',
        classes: 6,
        method: 'partial-fc',
        transport: 'message-port',
        plugins: [plugin],
      }),
      {
        code: 'BAD_CONFIG',
        message:
          /'message-port' cannot complete a collective inside a forward or backward pass, which --method partial-fc needs/,
      },
    );
  },
);

t.test('a plugin that is not there is named', async t => {
  await t.rejects(resolveConfig({ plugins: ['./no-such-plugin.mjs'] }), {
    code: 'MODULE_NOT_FOUND',
    message: /no-such-plugin\.mjs/,
  });
});
