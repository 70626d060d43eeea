// The shm transport between real processes (one rank per process, child_process, the segment met through a real
// rendezvous store): with 2 and 3 ranks every collective equals the reference loops over every copy bit for bit and
// the gloo transport's results; a peer killed with SIGKILL fails the others at once naming it, a hung one after the
// timeout naming it; the segment's name is gone from /dev/shm while the ranks run, after the run and after a crash,
// and when a process never comes to map it.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { reduceSlotsInto } from '../src/collectives/reduce-slots.js';
import { startStoreServer, type StoreServer } from '../src/collectives/gloo/tcp-store-server.js';
import { parseStoreUrl } from '../src/collectives/gloo/tcp-store-client.js';
import { loadShmAddon } from '../src/collectives/shm/shm-addon.js';
import { inputOf } from './fixtures/hier-inputs.js';
import { SHM_RESULTS, type ShmRankJob } from './fixtures/shm-rank-job.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { hostsTransport, isLoopback } from '../src/world/resolve-hosts.js';
import { parseRendezvous } from '../src/world/rendezvous.js';
import { resolveConfig, type TrainConfig } from '../src/config.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/shm-rank-process.js', import.meta.url));

interface Rank {
  child: ChildProcess;
  lines: string[];
  line(match: (l: string) => boolean): Promise<string>;
  exited: Promise<number | null>;
}

function startRank(job: ShmRankJob): Rank {
  const child = spawn(process.execPath, [FIXTURE, JSON.stringify(job)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines: string[] = [];
  const waiters: { match: (l: string) => boolean; resolve: (l: string) => void }[] = [];
  createInterface({ input: child.stdout! }).on('line', l => {
    lines.push(l);
    for (const w of waiters.filter(w => w.match(l))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(l);
    }
  });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const line = (match: (l: string) => boolean) => {
    const seen = lines.find(match);
    return seen !== undefined
      ? Promise.resolve(seen)
      : Promise.race([
          new Promise<string>(resolve => waiters.push({ match, resolve })),
          exited.then(code => {
            throw new Error(`rank ${job.rank} exited (${code}) before the line; got: ${lines.join(' | ')}`);
          }),
        ]);
  };
  return { child, lines, line, exited };
}

const servers: StoreServer[] = [];
const children: ChildProcess[] = [];
t.teardown(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await Promise.all(servers.map(s => s.close()));
});

async function world(
  size: number,
  script: (rank: number) => ShmRankJob['script'],
  over: Partial<ShmRankJob> = {},
  started = size,
) {
  const server = await startStoreServer({ host: '127.0.0.1' });
  servers.push(server);
  const outDir = mkdtempSync(path.join(tmpdir(), 'tandem-shm-'));
  t.teardown(() => rmSync(outDir, { recursive: true, force: true }));
  const ranks = Array.from({ length: started }, (_, rank) =>
    startRank({
      rank,
      size,
      store: server.url,
      key: 'test',
      script: script(rank),
      length: 1031,
      seed: 5 + size,
      chunkFloats: 100,
      timeoutMs: 20_000,
      outDir,
      ...over,
    }),
  );
  children.push(...ranks.map(r => r.child));
  return { ranks, outDir, port: parseStoreUrl(server.url).port };
}

/** This run's names in /dev/shm (they carry the store's port). */
function segmentsOf(port: number): string[] {
  return readdirSync('/dev/shm').filter(n => n.startsWith(`tandem-${port}-`));
}

function expected(size: number, length: number, seed: number, rank: number): Record<string, Float32Array> {
  const inputs = Array.from({ length: size }, (_, r) => inputOf(r, length, seed));
  const reduce = (op: 'sum' | 'mean' | 'max', s = 0, e = length) => {
    const out = Float32Array.from(inputs[rank]),
      all = new Float32Array(length);
    reduceSlotsInto(inputs, all, s, e, op);
    out.set(all.subarray(s, e), s);
    return out;
  };
  const gathered = new Float32Array(size * length);
  inputs.forEach((x, r) => gathered.set(x, r * length));
  return {
    sum: reduce('sum'),
    mean: reduce('mean'),
    max: reduce('max'),
    partSum: reduce('sum', 1, length - 2),
    allGather: gathered,
    broadcast: Float32Array.from(inputs[size - 1]),
  };
}

function read(file: string): Float32Array {
  const b = readFileSync(file);
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
}

function firstDifference(got: Float32Array, want: Float32Array): string | undefined {
  if (got.length !== want.length) return `length ${got.length}, want ${want.length}`;
  for (let i = 0; i < want.length; i++) if (!Object.is(got[i], want[i])) return `[${i}] ${got[i]}, want ${want[i]}`;
  return undefined;
}

t.test(
  'the default across processes: shm when the rendezvous is loopback (one machine) and shm is built; otherwise as ' +
    'before',
  async t => {
    const all = () => true,
      noShm = (name: string) => name !== 'shm';
    for (const host of ['127.0.0.1', '127.3.2.1', '::1', 'localhost']) t.ok(isLoopback(host), `${host} is loopback`);
    for (const host of ['10.0.0.1', '128.0.0.1', 'h0', '::2']) t.notOk(isLoopback(host), `${host} is not`);
    t.equal(hostsTransport(2, parseRendezvous('r', '127.0.0.1:29500'), all), 'shm');
    t.equal(hostsTransport(1, parseRendezvous('r', '[::1]:29500'), all), 'shm');
    t.equal(hostsTransport(2, parseRendezvous('r', '127.0.0.1:29500'), noShm), 'hierarchical', 'without the shm addon');
    t.equal(hostsTransport(1, parseRendezvous('r', '10.0.0.1:29500'), all), 'gloo');
    t.equal(hostsTransport(2, parseRendezvous('r', '10.0.0.1:29500'), all), 'hierarchical');
    if (!loadShmAddon().loaded || !glooAddonOrSkip()) return;
    const base: TrainConfig = {
      hosts: 2,
      hostRank: 1,
      devices: 1,
      batch: 8,
      data: 'synthetic-images',
      imageSize: [8, 8, 1],
      classes: 4,
      datasetSize: 64,
    };
    t.equal(
      (await resolveConfig({ ...base, rendezvous: '127.0.0.1:29500' })).transport,
      'shm',
      'resolved: loopback rendezvous',
    );
    t.equal(
      (await resolveConfig({ ...base, rendezvous: '10.0.0.1:29500' })).transport,
      'gloo',
      'resolved: another address',
    );
    t.equal(
      (await resolveConfig({ ...base, rendezvous: '127.0.0.1:29500', transport: 'gloo' })).transport,
      'gloo',
      'resolved: --transport gloo forces TCP',
    );
  },
);

const shm = loadShmAddon();
if (!shm.loaded) {
  if (process.env.TANDEM_REQUIRE_SHM === '1') t.fail(`TANDEM_REQUIRE_SHM=1 but ${shm.reason}`);
  else t.comment(`skipped: the shm addon is not built (npm install builds it on Linux): ${shm.reason}`);
} else if (glooAddonOrSkip()) {
  for (const size of [2, 3]) {
    t.test(
      `${size} processes: every collective equals the reference loops and the gloo transport, bit for bit; no name ` +
        `left in /dev/shm`,
      async t => {
        const { ranks, outDir, port } = await world(size, () => 'collectives');
        await Promise.all(ranks.map(r => r.line(l => l === 'done')));
        const codes = await Promise.all(ranks.map(r => r.exited));
        t.same(
          codes,
          ranks.map(() => 0),
          'every rank exits 0',
        );
        for (let rank = 0; rank < size; rank++) {
          const want = expected(size, 1031, 5 + size, rank);
          for (const name of SHM_RESULTS) {
            const got = read(path.join(outDir, `shm.r${rank}.${name}.f32`)),
              gloo = read(path.join(outDir, `gloo.r${rank}.${name}.f32`));
            t.equal(firstDifference(got, want[name]), undefined, `rank ${rank} ${name}: the reference bits`);
            t.equal(firstDifference(got, gloo), undefined, `rank ${rank} ${name}: the gloo transport's bits`);
          }
        }
        t.same(segmentsOf(port), [], 'nothing left in /dev/shm');
      },
    );
  }

  t.test(
    '3 processes, rank 2 killed with SIGKILL: ranks 0 and 1 fail at once (PEER_LOST, not the timeout) naming it; ' +
      'nothing in /dev/shm',
    async t => {
      const { ranks, port } = await world(3, () => 'loop', { length: 50_000, chunkFloats: 4096, timeoutMs: 60_000 });
      await Promise.all(ranks.map(r => r.line(l => l === 'reduced')));
      t.same(segmentsOf(port), [], 'the name is unlinked once every process mapped the segment');
      ranks[2].child.kill('SIGKILL');
      for (const rank of [0, 1]) {
        const failure = JSON.parse(await ranks[rank].line(l => l.startsWith('{'))) as { code: string; message: string };
        t.equal(failure.code, 'PEER_LOST', `rank ${rank}: PEER_LOST (${failure.message})`);
        t.match(
          failure.message,
          new RegExp(`peer rank 2 \\(host 2, 127\\.0\\.0\\.1\\).*process ${ranks[2].child.pid}`),
          `rank ${rank} names rank 2, its host and pid`,
        );
        t.equal(await ranks[rank].exited, 3, `rank ${rank} exits with its failure`);
      }
      t.same(segmentsOf(port), [], 'nothing left in /dev/shm after the crash');
    },
  );

  t.test('2 processes, rank 1 alive but never comes: rank 0 fails after the timeout (STALLED) naming it', async t => {
    const { ranks, port } = await world(2, rank => (rank === 0 ? 'loop' : 'hang'), { timeoutMs: 1500 });
    const failure = JSON.parse(await ranks[0].line(l => l.startsWith('{'))) as { code: string; message: string };
    t.equal(failure.code, 'STALLED', failure.message);
    t.match(
      failure.message,
      /waited 1\.5 s .*peer rank 1 \(host 1, 127\.0\.0\.1\) did not come/,
      'names the rank that did not come',
    );
    ranks[1].child.stdin!.end();
    t.same(await Promise.all(ranks.map(r => r.exited)), [3, 0], 'rank 0 exits with its failure, rank 1 when told');
    t.same(segmentsOf(port), [], 'nothing left in /dev/shm');
  });

  t.test(
    '2 processes, rank 1 never starts: rank 0 fails at the meeting (STALLED) and unlinks the segment it created',
    async t => {
      const { ranks, port } = await world(2, () => 'loop', { setupTimeoutMs: 1500 }, 1);
      const failure = JSON.parse(await ranks[0].line(l => l.startsWith('{'))) as { code: string; message: string };
      t.equal(failure.code, 'STALLED', failure.message);
      t.match(failure.message, /host 0 could not meet the other 1 process\(es\)/, 'says who it waited for');
      t.equal(await ranks[0].exited, 3, 'rank 0 exits with its failure');
      t.same(segmentsOf(port), [], 'nothing left in /dev/shm');
    },
  );
}
