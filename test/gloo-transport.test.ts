// The gloo transport: its collectives on real worker threads against the reference loops (bit for bit,
// random data, odd sizes, plain and SharedArrayBuffer memory, awaited and blocking), several contexts at
// once, the rendezvous (tandem's TCP store, Gloo's FileStore), and a training run equal to the shared-memory
// transport's. A peer that exits or hangs: gloo-transport-faults.test.ts.
import t from 'tap';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { reduceSlotsInto } from '../src/collectives/reduce-slots.js';
import type { GlooRankData } from '../src/collectives/gloo-transport.js';
import { train, type TrainConfig } from '../src/index.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import {
  ALL_REDUCE_CASES,
  allReduceInputs,
  type AllReduceProcessJob,
  type AllReduceProcessReply,
} from './fixtures/allreduce-inputs.js';

import { checkCollectives, expected, firstDifference, startRanks, storeFor } from './fixtures/gloo-ranks.js';
import { withFault } from './fixtures/fault-plugin.js';

if (glooAddonOrSkip()) {
  t.test(
    'collectives equal the reference loops bit for bit: 2 and 3 ranks, odd sizes, plain and shared memory, awaited ' +
      'and blocking',
    async t => {
      for (const [size, length, shared, blocking, chunkFloats] of [
        [3, 2, false, false],
        [3, 4099, true, true, 1000],
        [2, 65537, true, false],
      ] as [number, number, boolean, boolean, number?][]) {
        const data = { ...(await storeFor(size)), chunkFloats };
        const run = await startRanks(size, 'collectives', data, { length, shared, blocking }).done;
        checkCollectives(
          t,
          run,
          `${size} ranks, ${length} floats, ${shared ? 'shared' : 'plain'} memory, ` +
            `${blocking ? 'blocking' : 'awaited'}` +
            `${chunkFloats ? `, chunks of ${chunkFloats}` : ''}`,
        );
      }
    },
  );

  t.test(
    'both all-reduce algorithms, one process per rank: the bits of reduceSlotsInto over every copy (2, 3, 4 ranks; ' +
      'sum, mean, max, a middle range; chunks that do not divide the buffer)',
    async t => {
      const fixture = fileURLToPath(new URL('./fixtures/gloo-allreduce-process.js', import.meta.url));
      const cases: [number, number, Partial<GlooRankData>][] = [
        [2, 10_007, { algorithm: 'pipelined', pipelineChunkFloats: 1000 }],
        [3, 10_007, { algorithm: 'pipelined', pipelineChunkFloats: 1000 }],
        [4, 10_007, { algorithm: 'pipelined', pipelineChunkFloats: 999, chunkFloats: 4099 }],
        [4, 3, { algorithm: 'pipelined', pipelineChunkFloats: 2 }],
        [3, 200_003, { algorithm: 'pipelined' }],
        [3, 1_600_003, { algorithm: 'pipelined', pipelineChunkFloats: 1 << 19 }], // 4 chunks, a window of 2
        [3, 10_007, { algorithm: 'shards', chunkFloats: 4099 }],
        [4, 5, { algorithm: 'shards' }],
      ];
      // One world of processes per rank count, running its cases in turn (a communicator each): 3 worlds, not 8 (the
      // suite's time).
      const sizes = [...new Set(cases.map(([size]) => size))];
      const worlds = await Promise.all(
        sizes.map(async size => {
          const mine = cases.filter(([n]) => n === size);
          const jobs = await Promise.all(
            mine.map(async ([, length, options]) => ({
              data: { ...(await storeFor(size)), ...options },
              length,
              seed: 11 + size * 7 + length,
            })),
          );
          return { size, mine, jobs };
        }),
      );
      for (const { size, mine, jobs } of worlds) {
        const replies = await Promise.all(
          Array.from({ length: size }, async (_, rank) => {
            const child = spawn(
              process.execPath,
              [fixture, JSON.stringify(jobs.map(j => ({ rank, size, ...j })) satisfies AllReduceProcessJob[])],
              { stdio: ['ignore', 'pipe', 'inherit'] },
            );
            let out = '';
            child.stdout!.on('data', (d: Buffer) => {
              out += d.toString();
            });
            const [code] = (await once(child, 'exit')) as [number | null];
            return code === 0 ? (JSON.parse(out) as AllReduceProcessReply[]) : undefined;
          }),
        );
        mine.forEach(([, length, options], k) => {
          const { seed } = jobs[k];
          const label = `${size} ranks, ${length} floats, ${JSON.stringify(options)}`;
          for (const { name, op, range } of ALL_REDUCE_CASES) {
            const copies = allReduceInputs(size, length, seed);
            const want = Float32Array.from(copies[0]);
            const [s, e] = range(length);
            reduceSlotsInto(copies, want, s, e, op);
            const differences = replies
              .map((reply, rank) => {
                if (!reply) return `rank ${rank}: the process failed`;
                const got = new Float32Array(new Uint8Array(Buffer.from(reply[k][name], 'base64')).buffer);
                const wantHere = Float32Array.from(copies[rank]);
                wantHere.set(want.subarray(s, e), s);
                const d = firstDifference(got, wantHere);
                return d && `rank ${rank}: ${d}`;
              })
              .filter(Boolean);
            t.same(differences, [], `${label}, ${name}: every rank holds reduceSlotsInto's bits`);
          }
        });
      }
    },
  );

  t.test(
    "Gloo's own ring all-reduce (the addon's allReduce): sum within float32 rounding of the reference, max exact",
    async t => {
      const size = 2,
        length = 5003;
      const run = await startRanks(size, 'ring', await storeFor(size), { length }).done;
      const want = expected(run.inputs, 0);
      run.replies.forEach((replies, rank) => {
        const r = replies.find(m => m.type === 'results');
        if (r?.type !== 'results') {
          t.fail(`rank ${rank}: ${JSON.stringify(replies)}`);
          return;
        }
        const worst = r.results.sum.reduce(
          (w, v, i) => Math.max(w, Math.abs(v - want.sum[i]) / Math.max(1e-30, Math.abs(want.sum[i]) + 1e-6)),
          0,
        );
        t.ok(
          worst < 1e-5,
          `rank ${rank}: ring sum within ${worst.toExponential(2)} (relative) of the rank-ordered sum`,
        );
        t.equal(firstDifference(r.results.max, want.max), undefined, `rank ${rank}: ring max exact`);
      });
    },
  );

  t.test(
    'several contexts at once on different threads (2 communicators x 2 ranks, 10 rounds each) stay correct',
    async t => {
      const a = startRanks(2, 'collectives', await storeFor(2), {
        length: 3001,
        rounds: 10,
        shared: true,
        blocking: true,
      });
      const b = startRanks(2, 'collectives', await storeFor(2), { length: 777, rounds: 10 });
      const [ra, rb] = await Promise.all([a.done, b.done]);
      checkCollectives(t, ra, 'communicator A');
      checkCollectives(t, rb, 'communicator B');
    },
  );

  t.test("Gloo's FileStore on a shared directory (file:///dir) serves the rendezvous too", async t => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tandem-gloo-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const run = await startRanks(
      2,
      'collectives',
      { store: `file://${dir}`, prefix: 'file-test', hostname: '127.0.0.1' },
      { length: 257 },
    ).done;
    checkCollectives(t, run, 'file store, 2 ranks');
  });

  t.test(
    "2 devices train partial-fc through the gloo transport to the shared-memory transport's parameters, bit for bit",
    async t => {
      // Both communicators on gloo: the comm threads' gradient all-reduce, and the compute threads' blocking
      // all-gather and max/sum all-reduce inside forward and backward (Partial FC's global softmax).
      const base: TrainConfig = {
        model: 'mlp',
        data: 'synthetic-images',
        imageSize: [8, 8, 1],
        classes: 12,
        datasetSize: 96,
        batch: 12,
        steps: 4,
        devices: 2,
        method: 'partial-fc',
        embedding: 16,
        optimizer: 'adam',
        lr: 0.01,
        seed: 5,
      };
      const sm = await train(base);
      const gl = await train({ ...base, transport: 'gloo' });
      t.equal(gl.config.transport, 'gloo');
      let worst = 0,
        identical = true;
      sm.weights.forEach((w, k) =>
        w.values.forEach((v, i) => {
          const u = gl.weights[k].values[i];
          if (!Object.is(u, v)) identical = false;
          worst = Math.max(worst, Math.abs(u - v));
        }),
      );
      t.ok(identical, `bit-identical parameters (max |difference| ${worst})`);
      t.same(
        gl.history.map(h => h.loss),
        sm.history.map(h => h.loss),
        'the same losses every step',
      );
      t.ok(sm.weights.length > 0 && sm.history.length === 4, 'both runs trained');
    },
  );

  t.test(
    "a device that fails in the exchange ends a gloo run with its own error, as on shared memory (not its peer's " +
      'PEER_LOST)',
    async t => {
      const run = train({
        model: 'mlp',
        data: 'synthetic-images',
        imageSize: [8, 8, 1],
        classes: 4,
        datasetSize: 64,
        batch: 8,
        steps: 6,
        devices: 2,
        transport: 'gloo',
        stallTimeoutMs: 20_000,
        ...withFault({ device: 1, step: 2, phase: 'exchange', kind: 'throw' }),
      });
      await t.rejects(run, { code: 'DEVICE_FAILED', message: /device 1 failed at step 2 in phase exchange/ });
    },
  );
}

t.test(
  'without the addon, the gloo and hierarchical transports are refused before any thread starts, saying how to get it',
  async t => {
    const registry = fileURLToPath(new URL('../src/collectives/transport-registry.js', import.meta.url));
    const script =
      `import('${registry}').then(m => m.getTransport('gloo')).then(() => console.log('accepted'), e ` +
      `=> console.log(e.code, e.message))`;
    const out = execFileSync(process.execPath, ['-e', script], {
      env: { ...process.env, TANDEM_GLOO_ADDON: '/nonexistent/tandem_gloo.node' },
      encoding: 'utf8',
    });
    t.match(
      out,
      /^BAD_CONFIG transport 'gloo' is not available: the gloo addon was not built .*apt-get install libgloo-dev && npm install/,
    );
    const hier = execFileSync(
      process.execPath,
      ['-e', script.replace("getTransport('gloo')", "getTransport('hierarchical')")],
      { env: { ...process.env, TANDEM_GLOO_ADDON: '/nonexistent/tandem_gloo.node' }, encoding: 'utf8' },
    );
    t.match(
      hier,
      /^BAD_CONFIG transport 'hierarchical' is not available: the gloo addon was not built/,
      'so is the hierarchical transport',
    );
  },
);
