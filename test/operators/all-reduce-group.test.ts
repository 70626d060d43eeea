// allReduceGroup: each unit's group is averaged with the peers (all-reduce mean
// over the group's float range), one group at a time, in arrival order. The
// peers here are real ranks of a small in-process collective: each rank's
// pipeline runs on this thread and meets the others through promises.
import t from 'tap';
import { Subject, lastValueFrom, toArray } from 'rxjs';
import { allReduceGroup } from '../../src/pipeline/operators/all-reduce-group.js';
import type { Collective, ReduceOp } from '../../src/collectives/collective.js';
import type { ParameterGroup } from '../../src/model/parameter-layout.js';
import type { GroupExchange } from '../../src/pipeline/events.js';
import { wallNow } from '../../src/monitor/span.js';

type LogEntry = { rank: number; event: 'call' | 'done'; seq: number; start: number; end: number; at: number };

/** A communicator of `size` ranks inside one thread: the n-th operation of every rank meets the n-th of the others. */
class InProcessWorld {
  readonly log: LogEntry[] = [];
  private readonly meetings = new Map<
    number,
    {
      what: string;
      parts: (Float32Array | undefined)[];
      arrived: number;
      resolve: (parts: Float32Array[]) => void;
      reject: (e: Error) => void;
      done: Promise<Float32Array[]>;
    }
  >();
  private closed?: Error;

  constructor(readonly size: number) {}

  rank(rank: number): InProcessCollective {
    return new InProcessCollective(this, rank);
  }

  /** Rank `rank`'s part of operation `seq`; resolves with every rank's part once all have arrived. */
  meet(seq: number, rank: number, what: string, part: Float32Array): Promise<Float32Array[]> {
    if (this.closed) return Promise.reject(this.closed);
    let m = this.meetings.get(seq);
    if (!m) {
      let resolve!: (parts: Float32Array[]) => void, reject!: (e: Error) => void;
      const done = new Promise<Float32Array[]>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      m = { what, parts: new Array(this.size).fill(undefined), arrived: 0, resolve, reject, done };
      this.meetings.set(seq, m);
    }
    if (m.what !== what) {
      const e = new Error(`operation ${seq}: rank ${rank} called ${what}, a peer called ${m.what}`);
      m.reject(e);
      return Promise.reject(e);
    }
    m.parts[rank] = part;
    if (++m.arrived === this.size) {
      this.meetings.delete(seq);
      m.resolve(m.parts as Float32Array[]);
    }
    return m.done;
  }

  /** A rank leaves: every operation still waiting for it, and every later one, fails. */
  leave(rank: number): void {
    this.closed ??= new Error(`rank ${rank} closed the communicator`);
    for (const m of this.meetings.values()) m.reject(this.closed);
    this.meetings.clear();
  }
}

class InProcessCollective implements Collective {
  readonly transport = 'in-process-test';
  readonly size: number;
  private seq = 0;

  constructor(
    private readonly world: InProcessWorld,
    readonly rank: number,
  ) {
    this.size = world.size;
  }

  async allReduce(buf: Float32Array, start: number, end: number, op: ReduceOp): Promise<void> {
    const seq = this.seq++;
    this.world.log.push({ rank: this.rank, event: 'call', seq, start, end, at: wallNow() });
    const parts = await this.world.meet(seq, this.rank, `allReduce ${op} [${start}, ${end})`, buf.slice(start, end));
    for (let i = 0; i < end - start; i++) {
      // In rank order 0..size-1, rounding to float32 at every addition (the contract of every transport).
      let acc = op === 'max' ? -Infinity : 0;
      for (const p of parts) acc = op === 'max' ? Math.max(acc, p[i]) : Math.fround(acc + p[i]);
      buf[start + i] = op === 'mean' ? Math.fround(acc / this.size) : acc;
    }
    this.world.log.push({ rank: this.rank, event: 'done', seq, start, end, at: wallNow() });
  }

  async allGather(mine: Float32Array, all: Float32Array): Promise<void> {
    const parts = await this.world.meet(this.seq++, this.rank, `allGather ${mine.length}`, mine.slice());
    parts.forEach((p, r) => all.set(p, r * mine.length));
  }

  async broadcast(buf: Float32Array, root: number, start: number, end: number): Promise<void> {
    const parts = await this.world.meet(
      this.seq++,
      this.rank,
      `broadcast ${root} [${start}, ${end})`,
      buf.slice(start, end),
    );
    buf.set(parts[root], start);
  }

  async barrier(): Promise<void> {
    await this.world.meet(this.seq++, this.rank, 'barrier', new Float32Array(0));
  }

  close(): void {
    this.world.leave(this.rank);
  }
}

const LENGTH = 16;
const groups: ParameterGroup[] = [
  { name: 'fc', start: 0, end: 6 },
  { name: 'conv', start: 6, end: 16 },
];
const unit = (step: number, group: number): GroupExchange => ({ step, group, waitStart: 1, waitEnd: 2 });

/** Rank r's gradients: distinct, not exactly representable sums, a few negative. */
const gradientsOf = (rank: number) =>
  Float32Array.from({ length: LENGTH }, (_, i) => Math.sin(1.3 * i + 2.1 * rank) * (rank + 1) + 0.1 * i);

/** One rank's pipeline: feed it units, complete it, collect what comes out. */
function pipeline(collective: Collective, grads: Float32Array) {
  const source = new Subject<GroupExchange>();
  const out = lastValueFrom(source.pipe(allReduceGroup(collective, grads, groups), toArray()));
  return { source, out };
}

t.test(
  'the self-made collective works: two ranks average in rank order (checked before it checks the operator)',
  async t => {
    const world = new InProcessWorld(2);
    const [a, b] = [new Float32Array([1, 3, 5]), new Float32Array([3, 4, -5])];
    await Promise.all([world.rank(0).allReduce(a, 0, 3, 'mean'), world.rank(1).allReduce(b, 0, 3, 'mean')]);
    t.strictSame(
      [Array.from(a), Array.from(b)],
      [
        [2, 3.5, 0],
        [2, 3.5, 0],
      ],
    );
  },
);

t.test(
  "two ranks: each group becomes the mean of both ranks' gradients over its range, the same bits on both",
  async t => {
    const world = new InProcessWorld(2);
    const grads = [gradientsOf(0), gradientsOf(1)];
    const before = grads.map(g => Float32Array.from(g));
    const ranks = [0, 1].map(r => pipeline(world.rank(r), grads[r]));
    // Rank 0 hands its units in first; rank 1 later: the exchange waits for the peer.
    ranks[0].source.next(unit(1, 1));
    ranks[0].source.next(unit(1, 0));
    ranks[0].source.complete();
    ranks[1].source.next(unit(1, 1));
    ranks[1].source.next(unit(1, 0));
    ranks[1].source.complete();
    const [out0, out1] = await Promise.all(ranks.map(r => r.out));

    // The mean a second way: float64 sum of the two float32 values (exact), halved, rounded once.
    const mean = Array.from({ length: LENGTH }, (_, i) => Math.fround((before[0][i] + before[1][i]) / 2));
    t.strictSame(Array.from(grads[0]), mean, 'rank 0 holds the mean everywhere (both groups were exchanged)');
    t.strictSame(Array.from(grads[1]), mean, 'rank 1 holds the same bits');
    t.notSame(Array.from(before[0]), mean, 'and it is not what rank 0 had');
    for (const out of [out0, out1])
      t.strictSame(
        out.map(u => [u.step, u.group, u.waitStart, u.waitEnd]),
        [
          [1, 1, 1, 2],
          [1, 0, 1, 2],
        ],
        'units out in arrival order, fields kept',
      );
    t.strictSame(
      world.log.filter(e => e.event === 'call').map(e => [e.rank, e.start, e.end]),
      [
        [0, 6, 16],
        [1, 6, 16],
        [0, 0, 6],
        [1, 0, 6],
      ],
      "each rank asked for exactly the group's range, conv first as it arrived first",
    );
  },
);

t.test("only the unit's group is averaged: floats outside its range keep this rank's values", async t => {
  const world = new InProcessWorld(2);
  const grads = [gradientsOf(0), gradientsOf(1)];
  const before = grads.map(g => Float32Array.from(g));
  const ranks = [0, 1].map(r => pipeline(world.rank(r), grads[r]));
  for (const r of ranks) {
    r.source.next(unit(3, 0));
    r.source.complete();
  }
  await Promise.all(ranks.map(r => r.out));
  for (const r of [0, 1]) {
    t.strictSame(
      Array.from(grads[r].subarray(0, 6)),
      Array.from({ length: 6 }, (_, i) => Math.fround((before[0][i] + before[1][i]) / 2)),
      `rank ${r}: fc averaged`,
    );
    t.strictSame(Array.from(grads[r].subarray(6)), Array.from(before[r].subarray(6)), `rank ${r}: conv untouched`);
  }
});

t.test('one group at a time: a second unit does not start its all-reduce before the first has finished', async t => {
  const world = new InProcessWorld(2);
  const grads = [gradientsOf(0), gradientsOf(1)];
  const ranks = [0, 1].map(r => pipeline(world.rank(r), grads[r]));
  const units = [unit(1, 1), unit(1, 0), unit(2, 1), unit(2, 0)];
  for (const u of units) ranks[0].source.next(u);
  ranks[0].source.complete();
  // Rank 1 has not arrived: rank 0's first exchange is pending, and nothing else may have started.
  t.strictSame(
    world.log.map(e => [e.rank, e.event, e.seq]),
    [[0, 'call', 0]],
    'rank 0: one all-reduce in flight, the others queued',
  );
  for (const u of units) ranks[1].source.next(u);
  ranks[1].source.complete();
  const outs = await Promise.all(ranks.map(r => r.out));

  for (const rank of [0, 1]) {
    const mine = world.log.filter(e => e.rank === rank);
    t.strictSame(
      mine.map(e => [e.event, e.seq, e.start]),
      [
        ['call', 0, 6],
        ['done', 0, 6],
        ['call', 1, 0],
        ['done', 1, 0],
        ['call', 2, 6],
        ['done', 2, 6],
        ['call', 3, 0],
        ['done', 3, 0],
      ],
      `rank ${rank}: call, done, call, done… in arrival order`,
    );
    t.strictSame(
      outs[rank].map(u => [u.step, u.group]),
      units.map(u => [u.step, u.group]),
      `rank ${rank}: units out in arrival order`,
    );
  }
});

t.test('exchangeStart/exchangeEnd bracket the all-reduce; consecutive exchanges do not overlap', async t => {
  const world = new InProcessWorld(2);
  const grads = [gradientsOf(0), gradientsOf(1)];
  const ranks = [0, 1].map(r => pipeline(world.rank(r), grads[r]));
  for (const r of ranks) {
    r.source.next(unit(1, 0));
    r.source.next(unit(1, 1));
    r.source.complete();
  }
  const outs = await Promise.all(ranks.map(r => r.out));
  for (const rank of [0, 1]) {
    const calls = world.log.filter(e => e.rank === rank && e.event === 'call'),
      dones = world.log.filter(e => e.rank === rank && e.event === 'done');
    outs[rank].forEach((u, k) => {
      t.type(u.exchangeStart, 'number', `rank ${rank} unit ${k}: exchangeStart set`);
      t.type(u.exchangeEnd, 'number', `rank ${rank} unit ${k}: exchangeEnd set`);
      t.ok(u.exchangeStart! <= calls[k].at, 'exchangeStart taken before the all-reduce was called');
      t.ok(u.exchangeEnd! >= dones[k].at, 'exchangeEnd taken after it finished');
    });
    t.ok(
      outs[rank][1].exchangeStart! >= outs[rank][0].exchangeEnd!,
      `rank ${rank}: the second exchange began after the first ended`,
    );
  }
});

t.test('completion waits for the exchange in flight; a unit already queued still comes out first', async t => {
  const world = new InProcessWorld(2);
  const grads = [gradientsOf(0), gradientsOf(1)];
  const events: string[] = [];
  const source = new Subject<GroupExchange>();
  const finished = new Promise<void>(resolve =>
    source.pipe(allReduceGroup(world.rank(0), grads[0], groups)).subscribe({
      next: u => events.push(`next ${u.group}`),
      error: e => events.push(`error ${String(e)}`),
      complete: () => {
        events.push('complete');
        resolve();
      },
    }),
  );
  source.next(unit(1, 0));
  source.complete();
  t.strictSame(events, [], 'not complete while the exchange waits for the peer');
  const peer = pipeline(world.rank(1), grads[1]);
  peer.source.next(unit(1, 0));
  peer.source.complete();
  await finished;
  t.strictSame(events, ['next 0', 'complete']);
});

t.test('a rejected all-reduce errors the stream with its error; later units never start', async t => {
  const world = new InProcessWorld(2);
  const grads = [gradientsOf(0), gradientsOf(1)];
  const before = Float32Array.from(grads[0]);
  const seen: GroupExchange[] = [];
  const source = new Subject<GroupExchange>();
  const failed = new Promise<unknown>(resolve =>
    source.pipe(allReduceGroup(world.rank(0), grads[0], groups)).subscribe({
      next: u => seen.push(u),
      error: resolve,
      complete: () => resolve('completed instead'),
    }),
  );
  source.next(unit(1, 0));
  source.next(unit(1, 1));
  world.rank(1).close(); // the peer leaves while rank 0 waits for it
  const error = await failed;
  t.type(error, Error);
  t.match((error as Error).message, 'rank 1 closed the communicator');
  t.strictSame(seen, [], 'nothing emitted');
  t.strictSame(
    world.log.map(e => [e.rank, e.event, e.seq]),
    [[0, 'call', 0]],
    'the queued unit never called the collective',
  );
  t.strictSame(Array.from(grads[0]), Array.from(before), 'gradients untouched');
  t.equal(source.observed, false, 'the source was unsubscribed');
});

t.test('a source error passes through', async t => {
  const world = new InProcessWorld(1); // one rank: every all-reduce completes on its own
  const grads = gradientsOf(0);
  const source = new Subject<GroupExchange>();
  const out = lastValueFrom(source.pipe(allReduceGroup(world.rank(0), grads, groups), toArray()));
  source.error(new Error('compute side failed'));
  await t.rejects(out, { message: 'compute side failed' });
});

t.test("one rank: the mean is the rank's own values, and units still come out in order", async t => {
  const world = new InProcessWorld(1);
  const grads = gradientsOf(0);
  const before = Float32Array.from(grads);
  const { source, out } = pipeline(world.rank(0), grads);
  source.next(unit(5, 1));
  source.next(unit(5, 0));
  source.complete();
  t.strictSame(
    (await out).map(u => u.group),
    [1, 0],
  );
  t.strictSame(Array.from(grads), Array.from(before));
});
