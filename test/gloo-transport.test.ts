// The gloo transport: its collectives on real worker threads against the reference loops (bit for bit,
// random data, odd sizes, plain and SharedArrayBuffer memory, awaited and blocking), several contexts at
// once, a peer that exits or hangs, the rendezvous (tandem's TCP store, Gloo's FileStore), and a training
// run equal to the shared-memory transport's.
import t from 'tap';
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { reduceSlotsInto } from '../src/collectives/reduce-slots.js';
import { startStoreServer, type StoreServer } from '../src/collectives/gloo/tcp-store-server.js';
import type { GlooRankData } from '../src/collectives/gloo-transport.js';
import { train, type TrainConfig } from '../src/index.js';
import type { GlooRankJob, GlooRankReply, GlooScript } from './fixtures/gloo-rank-worker.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import {
  ALL_REDUCE_CASES,
  allReduceInputs,
  type AllReduceProcessJob,
  type AllReduceProcessReply,
} from './fixtures/allreduce-inputs.js';

interface RanksRun {
  inputs: Float32Array[];
  replies: GlooRankReply[][];
  gate: Int32Array;
}

/** Random float32 data: rank r's input of `length` floats in one shared buffer. */
function randomInputs(size: number, length: number, seed: number): SharedArrayBuffer {
  const input = new SharedArrayBuffer(Math.max(4, size * length * 4));
  const f = new Float32Array(input);
  let s = seed >>> 0;
  for (let i = 0; i < f.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    f[i] = (s / 2 ** 32 - 0.5) * 2 ** ((s % 17) - 4);
  }
  return input;
}

/** Runs `script` on `size` ranks (one worker each); every worker ends by itself (a hanging one when the test opens the gate). */
function startRanks(
  size: number,
  script: GlooScript | ((rank: number) => GlooScript),
  data: GlooRankData,
  { only, ...options }: Partial<GlooRankJob> & { only?: number[] } = {},
) {
  const length = options.length ?? 1031;
  const input = options.input ?? randomInputs(size, length, 7 + size * 31 + length);
  const gate = new SharedArrayBuffer(4);
  const workers = (only ?? Array.from({ length: size }, (_, rank) => rank)).map(
    rank =>
      new Worker(new URL('./fixtures/gloo-rank-worker.js', import.meta.url), {
        workerData: {
          rank,
          size,
          data,
          timeoutMs: 10_000,
          shared: false,
          blocking: false,
          rounds: 1,
          ...options,
          length,
          input,
          gate,
          script: typeof script === 'function' ? script(rank) : script,
        } satisfies GlooRankJob,
        execArgv: [], // not tap's loader hooks (inherited otherwise), which make each worker's start several times slower
      }),
  );
  const replies = workers.map(w => {
    const got: GlooRankReply[] = [];
    w.on('message', m => got.push(m as GlooRankReply));
    return got;
  });
  const inputs = Array.from({ length: size }, (_, r) => new Float32Array(input, r * length * 4, length));
  const exited = Promise.all(workers.map(w => once(w, 'exit')));
  return {
    inputs,
    replies,
    gate: new Int32Array(gate),
    workers,
    done: exited.then((): RanksRun => ({ inputs, replies, gate: new Int32Array(gate) })),
  };
}

const servers: StoreServer[] = [];
t.teardown(() => Promise.all(servers.map(s => s.close()))); // those whose ranks did not all come (they close themselves otherwise)

/** A store for one communicator of `size` ranks (it closes once they have all connected and left). */
async function storeFor(size: number): Promise<GlooRankData> {
  const server = await startStoreServer({ closeAfterClients: size });
  servers.push(server);
  return { store: server.url, prefix: `test.${Math.random().toString(36).slice(2)}`, hostname: '127.0.0.1' };
}

/** The reference results of the 'collectives' script, from the inputs, with the reference loops. */
function expected(inputs: Float32Array[], rank: number): Record<string, Float32Array> {
  const n = inputs[0].length,
    size = inputs.length;
  const reduce = (op: 'sum' | 'mean' | 'max', s = 0, e = n) => {
    const out = Float32Array.from(inputs[rank]);
    const slots = inputs.map(x => Float32Array.from(x));
    const all = new Float32Array(n);
    reduceSlotsInto(slots, all, s, e, op);
    out.set(all.subarray(s, e), s);
    return out;
  };
  const gathered = new Float32Array(size * n);
  inputs.forEach((x, r) => gathered.set(x, r * n));
  return {
    sum: reduce('sum'),
    mean: reduce('mean'),
    max: reduce('max'),
    partSum: reduce('sum', 1, Math.max(1, n - 2)),
    allGather: gathered,
    broadcast: Float32Array.from(inputs[size - 1]),
  };
}

function firstDifference(got: Float32Array, want: Float32Array): string | undefined {
  if (got.length !== want.length) return `length ${got.length}, want ${want.length}`;
  for (let i = 0; i < want.length; i++) if (!Object.is(got[i], want[i])) return `[${i}] ${got[i]}, want ${want[i]}`;
  return undefined;
}

function checkCollectives(
  t: Pick<typeof import('tap').default, 'fail' | 'same' | 'ok'>,
  run: RanksRun,
  label: string,
): void {
  run.replies.forEach((replies, rank) => {
    const result = replies.find(m => m.type === 'results');
    const failed = replies.find(m => m.type === 'error');
    if (!result || result.type !== 'results') {
      t.fail(`${label}: rank ${rank} gave no results: ${failed?.type === 'error' ? failed.error.message : 'nothing'}`);
      return;
    }
    const want = expected(run.inputs, rank);
    const wrong = Object.keys(want)
      .map(k => [k, firstDifference(result.results[k], want[k])])
      .filter(([, d]) => d);
    t.same(
      wrong,
      [],
      `${label}: rank ${rank} holds the reference bits (sum, mean, max, part sum, all-gather, broadcast)`,
    );
    t.ok(result.sameEveryRound, `${label}: rank ${rank}: every round gave the same bits`);
  });
}

if (glooAddonOrSkip()) {
  t.test(
    'collectives equal the reference loops bit for bit: 2 and 3 ranks, odd sizes, plain and shared memory, awaited and blocking',
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
          `${size} ranks, ${length} floats, ${shared ? 'shared' : 'plain'} memory, ${blocking ? 'blocking' : 'awaited'}` +
            `${chunkFloats ? `, chunks of ${chunkFloats}` : ''}`,
        );
      }
    },
  );

  t.test(
    'both all-reduce algorithms, one process per rank: the bits of reduceSlotsInto over every copy (2, 3, 4 ranks; sum, mean, max, a middle range; chunks that do not divide the buffer)',
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
      // One world of processes per rank count, running its cases in turn (a communicator each): 3 worlds, not 8 (the suite's time).
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

  t.test('a peer whose thread exits: the survivor fails with PEER_LOST naming the peer rank', async t => {
    const run = await startRanks(
      2,
      rank => (rank === 0 ? 'all-reduce-after-join' : 'exit-after-join'),
      await storeFor(2),
      { length: 1 << 16 },
    ).done;
    const err = run.replies[0].find(m => m.type === 'error');
    if (err?.type !== 'error') {
      t.fail(`rank 0 did not fail: ${JSON.stringify(run.replies[0])}`);
      return;
    }
    t.equal(err.error.code, 'PEER_LOST');
    t.match(
      err.error.message,
      /peer rank 1 \(\[127\.0\.0\.1\]:\d+\)/,
      `the message names the peer: ${err.error.message}`,
    );
    t.comment(`failed ${err.afterMs} ms after the operation started`);
  });

  t.test('a peer process killed with SIGKILL: the survivor fails with PEER_LOST naming the peer rank', async t => {
    const data = await storeFor(2);
    const survivor = startRanks(2, 'all-reduce-after-join', data, { only: [0], length: 1 << 16 });
    const child = spawn(
      process.execPath,
      [fileURLToPath(new URL('./fixtures/gloo-rank-process.js', import.meta.url)), '1', '2', data.store, data.prefix],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    const exited = once(child, 'exit');
    const [joined] = (await once(child.stdout!, 'data')) as [Buffer];
    t.equal(joined.toString(), 'joined\n', 'the peer process joined');
    const killedAt = Date.now();
    child.kill('SIGKILL');
    const run = await survivor.done;
    const seenAfter = Date.now() - killedAt;
    t.same(await exited, [null, 'SIGKILL']);
    const err = run.replies[0].find(m => m.type === 'error');
    if (err?.type !== 'error') {
      t.fail(`rank 0 did not fail: ${JSON.stringify(run.replies[0])}`);
      return;
    }
    t.equal(err.error.code, 'PEER_LOST');
    t.match(err.error.message, /lost peer rank 1 .*peer rank 1 \(\[127\.0\.0\.1\]:\d+\)/, err.error.message);
    t.comment(`the survivor's thread had ended ${seenAfter} ms after the kill`);
  });

  t.test(
    'a peer that hangs: the survivor fails with STALLED at the timeout, and the hanging rank ends when let go',
    async t => {
      const ranks = startRanks(
        2,
        rank => (rank === 0 ? 'all-reduce-after-join' : 'hang-after-join'),
        await storeFor(2),
        { timeoutMs: 1000 },
      );
      const w0 = once(ranks.workers[0], 'exit');
      await w0;
      Atomics.store(ranks.gate, 0, 1);
      Atomics.notify(ranks.gate, 0);
      const run = await ranks.done;
      const err = run.replies[0].find(m => m.type === 'error');
      if (err?.type !== 'error') {
        t.fail(`rank 0 did not fail: ${JSON.stringify(run.replies[0])}`);
        return;
      }
      t.equal(err.error.code, 'STALLED');
      t.match(err.error.message, /peer rank 1 did not answer within 1\.0 s/, err.error.message);
      t.ok(err.afterMs >= 900, `failed ${err.afterMs} ms after the operation started, at the 1 s timeout or later`);
      t.ok(
        err.heartbeats >= 5,
        `the waiting rank beat its heartbeat ${err.heartbeats} times while Gloo waited (the watchdog sees it alive)`,
      );
    },
  );

  t.test(
    'a rendezvous missing a rank fails with STALLED naming the store key it waited for; a communicator of one needs no peer',
    async t => {
      const run = await startRanks(2, 'collectives', await storeFor(2), { timeoutMs: 800, only: [0] }).done;
      const err = run.replies[0].find(m => m.type === 'error');
      if (err?.type !== 'error') {
        t.fail(`rank 0 did not fail: ${JSON.stringify(run.replies[0])}`);
        return;
      }
      t.equal(err.error.code, 'STALLED');
      t.match(err.error.message, /could not join communicator .*key '[^']+' was not set within/, err.error.message);
      t.comment(`failed after ${err.afterMs} ms`);
      checkCollectives(t, await startRanks(1, 'collectives', await storeFor(1), { length: 5 }).done, '1 rank');
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
    "a device that fails in the exchange ends a gloo run with its own error, as on shared memory (not its peer's PEER_LOST)",
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
        faultInjection: { device: 1, step: 2, phase: 'exchange', kind: 'throw' },
      });
      await t.rejects(run, { code: 'DEVICE_FAILED', message: /device 1 failed at step 2 in phase exchange/ });
    },
  );
}

t.test(
  'without the addon, the gloo and hierarchical transports are refused before any thread starts, saying how to get it',
  async t => {
    const registry = fileURLToPath(new URL('../src/collectives/transport-registry.js', import.meta.url));
    const script = `import('${registry}').then(m => m.getTransport('gloo')).then(() => console.log('accepted'), e => console.log(e.code, e.message))`;
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
