// runPriorityStep: ranks that see their gradients become ready at different times still make the same decisions —
// every rank issues the same sequence of collectives (agreements and chunks), every chunk of every group is exchanged
// once and in order, a group is finished right after its last chunk, and an agreed group of higher priority overtakes
// a group in flight. The ranks run on this thread and meet through promises; a mismatched collective fails the meeting.
import t from 'tap';
import { chunksOf, runPriorityStep, type ExchangeChunk } from '../src/pipeline/priority-schedule.js';

/** The n-th collective of every rank meets the n-th of the others; they must be the same operation. */
class Meetings {
  private readonly pending = new Map<
    number,
    {
      what: string;
      values: number[];
      resolve: (v: number[]) => void;
      reject: (e: Error) => void;
      done: Promise<number[]>;
    }
  >();
  constructor(private readonly size: number) {}
  meet(seq: number, what: string, value: number): Promise<number[]> {
    let m = this.pending.get(seq);
    if (!m) {
      let resolve!: (v: number[]) => void, reject!: (e: Error) => void;
      const done = new Promise<number[]>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      m = { what, values: [], resolve, reject, done };
      this.pending.set(seq, m);
    }
    if (m.what !== what) {
      const e = new Error(`collective ${seq}: '${what}' met '${m.what}'`);
      m.reject(e);
      return Promise.reject(e);
    }
    m.values.push(value);
    if (m.values.length === this.size) {
      this.pending.delete(seq);
      m.resolve(m.values);
    }
    return m.done;
  }
}

/** A seeded generator (mulberry32). */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** One step on `size` ranks; `readyAhead(rank)` says how many more groups a rank sees ready at each look. */
async function step(sizes: number[], chunkFloats: number, size: number, readyAhead: (rank: number) => number) {
  let start = 0;
  const groups = sizes.map((n, i) => ({ name: `g${i}`, start, end: (start += n) }));
  const chunks = groups.map(g => chunksOf(g, chunkFloats));
  const meetings = new Meetings(size);
  const logs = await Promise.all(
    Array.from({ length: size }, async (_, rank) => {
      let seq = 0,
        ready = 0;
      const log: string[] = [];
      const ok = await runPriorityStep(chunks, {
        waitReady: g => {
          ready = Math.max(ready, g + 1);
          return true;
        }, // the wait ends: this rank has group g
        readyPrefix: () => (ready = Math.min(groups.length, ready + readyAhead(rank))),
        agree: async count => {
          log.push('agree');
          return Math.min(...(await meetings.meet(seq++, 'agree', count)));
        },
        exchangeChunk: async (g, c: ExchangeChunk) => {
          log.push(`chunk ${g}.${c.index}`);
          await meetings.meet(seq++, `chunk ${g}.${c.index} [${c.start}, ${c.end})`, 0);
        },
        finish: async g => {
          log.push(`finish ${g}`);
        },
      });
      t.ok(ok, `rank ${rank} finished the step`);
      return log;
    }),
  );
  return { logs, chunks };
}

t.test(
  'ranks with different readiness make the same decisions; every chunk once, in order; finish after the last chunk',
  async t => {
    for (let trial = 0; trial < 30; trial++) {
      const r = random(trial + 1);
      const size = 2 + Math.floor(r() * 3);
      const sizes = Array.from({ length: 1 + Math.floor(r() * 5) }, () => 1 + Math.floor(r() * 50));
      const chunkFloats = 1 + Math.floor(r() * 20);
      const rngs = Array.from({ length: size }, (_, k) => random(1000 * trial + k));
      // 0-2 more groups per look
      const { logs, chunks } = await step(sizes, chunkFloats, size, rank => Math.floor(rngs[rank]() * 3));
      for (const log of logs.slice(1)) t.same(log, logs[0], `trial ${trial}: every rank the same sequence`);
      const exchanged = logs[0].filter(l => l.startsWith('chunk '));
      t.equal(
        exchanged.length,
        chunks.reduce((n, c) => n + c.length, 0),
        `trial ${trial}: every chunk exchanged once`,
      );
      chunks.forEach((cs, g) => {
        const mine = exchanged.filter(l => l.startsWith(`chunk ${g}.`));
        t.same(
          mine,
          cs.map(c => `chunk ${g}.${c.index}`),
          `trial ${trial}, group ${g}: chunks in order`,
        );
        t.equal(
          logs[0].indexOf(`finish ${g}`),
          logs[0].lastIndexOf(`chunk ${g}.${cs.length - 1}`) + 1,
          `trial ${trial}, group ${g}: finished right after its last chunk`,
        );
      });
    }
  },
);

t.test('a group every rank has ready overtakes a group in flight; not before every rank has it', async t => {
  // Two groups: g0 in 5 chunks, g1 in 1. Rank 0 sees g1 ready at once, rank 1 only at its third look.
  let looks = 0;
  const { logs } = await step([50, 5], 10, 2, rank => (rank === 0 ? 2 : ++looks === 3 ? 2 : 0));
  t.same(
    logs[0],
    [
      'agree',
      'chunk 0.0',
      'agree',
      'chunk 0.1',
      'agree',
      'chunk 1.0',
      'finish 1',
      'chunk 0.2',
      'chunk 0.3',
      'chunk 0.4',
      'finish 0',
    ],
    'g1 goes after the chunk at whose end both ranks had it; then g0 resumes',
  );
  t.same(logs[1], logs[0]);
});

t.test('one group: no agreement at all', async t => {
  const { logs } = await step([25], 10, 3, () => 1);
  t.same(logs[0], ['chunk 0.0', 'chunk 0.1', 'chunk 0.2', 'finish 0']);
});
