// The hierarchical transport across real processes: H "hosts" (one process each, on 127.0.0.1), L device
// threads per host, shared memory inside a host and Gloo between hosts. Every rank must hold exactly the
// bits of the reference loops over all N = H × L copies in global-rank order (all-reduce mean/sum/max,
// registered and plain buffers, whole and part ranges, chunks small enough for many ticks of the chain),
// and the world's all-gather, broadcast and barrier; a lost or hanging host surfaces as PEER_LOST / STALLED.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { reduceSlotsInto } from '../src/collectives/reduce-slots.js';
import { chainTicks, tickMessages } from '../src/collectives/hierarchical-transport.js';
import { startStoreServer } from '../src/collectives/gloo/tcp-store-server.js';
import { HIER_RESULTS, inputOf, type HierHostJob } from './fixtures/hier-inputs.js';
import type { HierNews } from './fixtures/hier-host.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';

const HOST = fileURLToPath(new URL('./fixtures/hier-host.js', import.meta.url));

interface HostRun {
  child: ChildProcess;
  news: HierNews[];
  lines: AsyncIterable<unknown>;
  allJoined: Promise<void>;
  exited: Promise<number | null>;
}

function startHost(job: HierHostJob): HostRun {
  const child = spawn(process.execPath, [HOST, JSON.stringify(job)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const news: HierNews[] = [];
  let joined!: () => void;
  const allJoined = new Promise<void>(resolve => {
    joined = resolve;
  });
  let buffered = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      const line = JSON.parse(buffered.slice(0, nl)) as HierNews | { type: 'all-joined' };
      buffered = buffered.slice(nl + 1);
      if (line.type === 'all-joined') joined();
      else news.push(line as HierNews);
    }
  });
  const exited = new Promise<number | null>(resolve => child.on('exit', code => resolve(code)));
  return { child, news, lines: child.stdout!, allJoined, exited };
}

/** H host processes of L devices meeting at a fresh store; resolves when they have all exited. */
async function startWorld(
  t: Pick<typeof import('tap').default, 'teardown'>,
  hosts: number,
  local: number,
  job: Partial<HierHostJob>,
) {
  const server = await startStoreServer({ host: '127.0.0.1' });
  t.teardown(() => server.close());
  const outDir = mkdtempSync(path.join(tmpdir(), 'tandem-hier-'));
  t.teardown(() => rmSync(outDir, { recursive: true, force: true }));
  const key = `hier.${Math.random().toString(36).slice(2)}`;
  const runs = Array.from({ length: hosts }, (_, host) =>
    startHost({
      host,
      hosts,
      local,
      store: server.url,
      key,
      timeoutMs: 20_000,
      script: 'collectives',
      length: 1031,
      seed: 1,
      chunkFloats: 97,
      stagingFloats: 1000,
      rounds: 1,
      outDir,
      ...job,
    }),
  );
  t.teardown(() =>
    runs.forEach(r => {
      if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
    }),
  );
  return { runs, outDir };
}

/**
 * What rank `rank` must hold for each result of the fixture's `collectives`, from the inputs and the reference loops.
 */
function expected(size: number, rank: number, length: number, seed: number): Record<string, Float32Array> {
  const inputs = Array.from({ length: size }, (_, g) => inputOf(g, length, seed));
  const reduced = (op: 'sum' | 'mean' | 'max', s = 0, e = length) => {
    const all = new Float32Array(length);
    reduceSlotsInto(
      inputs.map(x => Float32Array.from(x)),
      all,
      s,
      e,
      op,
    );
    const out = Float32Array.from(inputs[rank]);
    out.set(all.subarray(s, e), s);
    return out;
  };
  const few = Math.min(37, length);
  const gathered = new Float32Array(few * size);
  inputs.forEach((x, g) => gathered.set(x.subarray(0, few), g * few));
  const root = inputs[size - 2];
  const plainBroadcast = Float32Array.from(inputs[rank]);
  if (length > 3) plainBroadcast.set(root.subarray(2, length - 1), 2);
  return {
    sum: reduced('sum'),
    mean: reduced('mean'),
    max: reduced('max'),
    plainSum: reduced('sum'),
    plainMean: reduced('mean'),
    plainMax: reduced('max'),
    partMean: reduced('mean', 1, Math.max(1, length - 2)),
    allGather: gathered,
    broadcast: Float32Array.from(root),
    plainBroadcast,
  };
}

function firstDifference(got: Float32Array, want: Float32Array): string | undefined {
  if (got.length !== want.length) return `length ${got.length}, want ${want.length}`;
  for (let i = 0; i < want.length; i++) if (!Object.is(got[i], want[i])) return `[${i}] ${got[i]}, want ${want[i]}`;
  return undefined;
}

t.test(
  'the chain plan: every chunk visits hosts 0..H-1 in order, one hop a tick, and its final reaches every host',
  async t => {
    for (const [hosts, chunks] of [
      [2, 1],
      [2, 5],
      [3, 4],
      [4, 7],
      [5, 1],
    ]) {
      const prefixAt = new Map<string, number>(),
        finalAt = new Map<string, number>();
      const ticks = chainTicks(hosts, chunks);
      for (let tick = 0; tick < ticks; tick++) {
        const msgs = tickMessages(hosts, chunks, tick);
        for (const m of msgs) (m.kind === 'prefix' ? prefixAt : finalAt).set(`${m.chunk}:${m.to}`, tick);
        for (let h = 0; h < hosts; h++) {
          const to = new Set(msgs.filter(m => m.from === h).map(m => m.to)),
            from = new Set(msgs.filter(m => m.to === h).map(m => m.from));
          if (to.size > 1 || from.size > 1 || msgs.some(m => m.from === m.to))
            t.fail(`${hosts} hosts, tick ${tick}: host ${h} talks to ${[...to]} and hears ${[...from]}`);
        }
      }
      let ok = true;
      for (let c = 0; c < chunks; c++) {
        // host h gets chunk c's prefix at tick c+h-1
        for (let h = 1; h < hosts; h++) ok &&= prefixAt.get(`${c}:${h}`) === c + h - 1;
        const done = prefixAt.get(`${c}:${hosts - 1}`)!;
        // and every other host its final, later
        for (let h = 0; h < hosts - 1; h++) ok &&= (finalAt.get(`${c}:${h}`) ?? -1) > done;
      }
      t.ok(ok, `${hosts} hosts, ${chunks} chunks: prefixes in host order, finals after the last host (${ticks} ticks)`);
      t.equal(tickMessages(hosts, chunks, ticks).length, 0, 'nothing after the last tick');
    }
  },
);

if (glooAddonOrSkip()) {
  t.test(
    'H hosts x L devices hold the flat rank-ordered bits on every rank: 2x2, 3x2, 2x3, odd sizes, many ticks',
    async t => {
      const cases: [number, number, Partial<HierHostJob>][] = [
        [2, 2, { length: 5003, chunkFloats: 97, stagingFloats: 1000, rounds: 2 }],
        [3, 2, { length: 4099, chunkFloats: 61, stagingFloats: 777 }],
        [2, 3, { length: 3001, chunkFloats: 50, stagingFloats: 512 }],
        [2, 3, { length: 2, chunkFloats: 1, stagingFloats: 1 }],
      ];
      for (const [hosts, local, job] of cases) {
        const label = `${hosts} hosts x ${local} devices, ${job.length} floats, chunks of ${job.chunkFloats}`;
        const { runs, outDir } = await startWorld(t, hosts, local, job);
        const codes = await Promise.all(runs.map(r => r.exited));
        t.same(
          codes,
          runs.map(() => 0),
          `${label}: every host process exited 0`,
        );
        const size = hosts * local;
        for (let rank = 0; rank < size; rank++) {
          const news = runs[Math.floor(rank / local)].news.find(m => m.rank === rank && m.type !== 'joined');
          if (news?.type !== 'done') {
            t.fail(`${label}: rank ${rank}: ${JSON.stringify(news)}`);
            continue;
          }
          t.ok(news.sameEveryRound, `${label}: rank ${rank}: the same bits every round`);
          const want = expected(size, rank, job.length!, 1);
          const wrong = HIER_RESULTS.map(name => {
            const bytes = readFileSync(path.join(outDir, `r${rank}.${name}.f32`));
            return [name, firstDifference(new Float32Array(new Uint8Array(bytes).buffer), want[name])];
          }).filter(([, d]) => d);
          t.same(wrong, [], `${label}: rank ${rank} holds the reference bits (${HIER_RESULTS.join(', ')})`);
        }
      }
    },
  );

  t.test(
    "a host killed with SIGKILL: the other host's devices fail with PEER_LOST naming the lost peer's rank and host",
    async t => {
      const { runs } = await startWorld(t, 2, 2, {
        script: 'wait-then-all-reduce',
        length: 1 << 16,
        chunkFloats: 1 << 12,
      });
      await Promise.all(runs.map(r => r.allJoined));
      runs[1].child.kill('SIGKILL');
      await runs[1].exited;
      runs[0].child.stdin!.write('go\n');
      t.equal(await runs[0].exited, 0);
      for (const rank of [0, 1]) {
        const news = runs[0].news.find(m => m.rank === rank && m.type !== 'joined');
        if (news?.type !== 'error') {
          t.fail(`rank ${rank} did not fail: ${JSON.stringify(news)}`);
          continue;
        }
        t.equal(news.code, 'PEER_LOST', news.message);
        t.match(
          news.message,
          new RegExp(`gloo rank ${rank} \\(host 0\\): lost peer rank ${rank + 2} \\(host 1, 127\\.0\\.0\\.1\\)`),
          news.message,
        );
      }
    },
  );

  t.test(
    "a host that hangs: the other host's devices fail with STALLED at the timeout, beating their heartbeat meanwhile",
    async t => {
      const { runs } = await startWorld(t, 2, 2, { script: 'wait-then-all-reduce', length: 1 << 12, timeoutMs: 1000 });
      await Promise.all(runs.map(r => r.allJoined));
      runs[0].child.stdin!.write('go\n'); // host 1 never goes
      t.equal(await runs[0].exited, 0);
      for (const rank of [0, 1]) {
        const news = runs[0].news.find(m => m.rank === rank && m.type !== 'joined');
        if (news?.type !== 'error') {
          t.fail(`rank ${rank} did not fail: ${JSON.stringify(news)}`);
          continue;
        }
        t.equal(news.code, 'STALLED', news.message);
        t.match(news.message, /peer rank [23] \(host 1, 127\.0\.0\.1\) did not answer within 1\.0 s/, news.message);
        t.ok(news.heartbeats >= 5, `rank ${rank} beat its heartbeat ${news.heartbeats} times while it waited`);
      }
      runs[1].child.kill('SIGKILL');
      await runs[1].exited;
    },
  );
}
