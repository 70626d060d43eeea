// Shared-memory all-reduce and broadcast on real worker threads, against the
// same mean computed on one thread in float64.
import t from 'tap';
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { shardOf } from '../src/collectives/reduce-slots.js';
import { SHARED_MEMORY_TRANSPORT, SMALL_FLOATS } from '../src/collectives/shared-memory-transport.js';
import type { AllReduceKind } from '../src/collectives/collective.js';

/**
 * Each rank's buffer is its slot of one shared buffer, registered with the transport (read in place) unless `staging`
 * (tiny staging area: chunks).
 */
async function runRanks(
  size: number,
  kind: string,
  length: number,
  ranges: [number, number][],
  op: string,
  fill: (r: number, i: number) => number,
  options: { staging?: boolean; blocking?: boolean } = {},
) {
  const data = new SharedArrayBuffer(Math.max(1, size * length * 4));
  const slots = Array.from({ length: size }, (_, r) => new Float32Array(data, r * length * 4, length));
  slots.forEach((s, r) =>
    s.forEach((_, i) => {
      s[i] = fill(r, i);
    }),
  );
  const before = slots.map(s => Float32Array.from(s));
  const { handles } = SHARED_MEMORY_TRANSPORT.prepare({
    name: 'test',
    size,
    registered: options.staging ? [] : [{ buffer: data, slotFloats: length, slots: size }],
    stagingFloats: options.staging ? 7 : 1 << 16,
    options: { allReduce: kind as AllReduceKind },
  });
  const workers = Array.from(
    { length: size },
    (_, rank) =>
      new Worker(new URL('./fixtures/collective-worker.js', import.meta.url), {
        workerData: { handle: handles[rank], data, length, ranges, op, blocking: options.blocking },
        execArgv: [],
      }),
  );
  const replies = await Promise.all(workers.map(w => once(w, 'message').then(([m]) => m as unknown)));
  await Promise.all(workers.map(w => w.terminate()));
  return { before, after: slots, replies };
}

t.test('shardOf covers a range exactly once, shards differ by at most one', async t => {
  for (const [from, to] of [
    [0, 0],
    [0, 1],
    [3, 10],
    [0, 1001],
  ]) {
    for (let n = 1; n <= 5; n++) {
      const shards = Array.from({ length: n }, (_, r) => shardOf(from, to, r, n));
      t.equal(shards[0][0], from);
      t.equal(shards[n - 1][1], to);
      for (let r = 1; r < n; r++) t.equal(shards[r][0], shards[r - 1][1]);
      const sizes = shards.map(([a, b]) => b - a);
      t.ok(Math.max(...sizes) - Math.min(...sizes) <= 1);
    }
  }
});

t.test(
  "reduce-scatter mean: each rank's shard holds the all-reduce's bits, the rest of its slot is untouched (1-4 ranks)",
  async t => {
    for (let size = 1; size <= 4; size++) {
      const length = 1031;
      const ranges: [number, number][] = [
        [0, 0],
        [0, 1],
        [1, 4],
        [4, 1031],
      ];
      const fill = (r: number, i: number) => Math.sin(r * 7.1 + i) * (r + 1);
      const scattered = await runRanks(size, 'sharded', length, ranges, 'reduceScatterMean', fill);
      const reduced = await runRanks(size, 'sharded', length, ranges, 'allReduceMean', fill);
      let ok = true;
      scattered.replies.forEach((shards, r) => {
        t.same(
          shards,
          ranges.map(([s, e]) => shardOf(s, e, r, size)),
          `${size} rank(s): rank ${r} reduced shardOf's shard of each range`,
        );
        const mine = new Set<number>();
        for (const [s, e] of shards as [number, number][]) for (let i = s; i < e; i++) mine.add(i);
        for (let i = 0; i < length; i++) {
          const expected = mine.has(i) ? reduced.after[r][i] : scattered.before[r][i];
          if (!Object.is(scattered.after[r][i], expected)) ok = false;
        }
      });
      t.ok(ok, `${size} rank(s): in its shards every rank holds the all-reduce mean's bits; elsewhere its own values`);
    }
  },
);

for (const kind of ['sharded', 'primary']) {
  t.test(
    `${kind} all-reduce mean: 1-4 ranks, sizes not divisible by the rank count, empty and tiny ranges`,
    async t => {
      for (let size = 1; size <= 4; size++) {
        const length = 1031; // prime: never divisible
        const ranges: [number, number][] = [
          [0, 0],
          [0, 1],
          [1, 4],
          [4, 4],
          [4, 1031],
        ];
        const { before, after } = await runRanks(
          size,
          kind,
          length,
          ranges,
          'allReduceMean',
          (r, i) => Math.sin(r * 7.1 + i) * (r + 1),
        );
        let worst = 0,
          identical = true;
        for (let i = 0; i < length; i++) {
          let mean = 0;
          for (let r = 0; r < size; r++) mean += before[r][i];
          mean /= size;
          worst = Math.max(worst, Math.abs(after[0][i] - mean));
          for (let r = 1; r < size; r++) if (after[r][i] !== after[0][i]) identical = false;
        }
        t.ok(worst < 1e-6, `${size} rank(s): max |result - mean| = ${worst.toExponential(2)}`);
        t.ok(identical, `${size} rank(s): every rank holds the same bits`);
      }
    },
  );
}

t.test('broadcast copies the root (last rank) into every slot over the range only', async t => {
  for (let size = 1; size <= 4; size++) {
    const { before, after } = await runRanks(size, 'sharded', 17, [[2, 11]], 'broadcast', (r, i) => r * 100 + i);
    for (let r = 0; r < size; r++) {
      t.same(
        Array.from(after[r].subarray(2, 11)),
        Array.from(before[size - 1].subarray(2, 11)),
        `rank ${r} of ${size} got the root's values`,
      );
      t.same(
        Array.from(after[r].subarray(0, 2)),
        Array.from(before[r].subarray(0, 2)),
        `rank ${r} outside the range untouched`,
      );
    }
  }
});

t.test(
  'buffers that are not registered: up to SMALL_FLOATS in one barrier, larger through the staging area in chunks; ' +
    'the same results, sum/mean/max, async and blocking',
  async t => {
    const length = SMALL_FLOATS + 904; // [0, 5): the one-barrier form; [5, length): chunks of 7
    const fill = (r: number, i: number) => Math.cos(r * 1.3 + i) * (r + 2);
    for (const size of [3]) {
      // the staging path has no branch on the rank count (1-4 ranks in place: above); the suite's time
      for (const op of ['sum', 'mean', 'max'] as const) {
        const inPlace = await runRanks(
          size,
          'sharded',
          length,
          [
            [0, 5],
            [5, length],
          ],
          op,
          fill,
        );
        for (const [kind, blocking] of [
          ['sharded', false],
          ['primary', true],
        ] as const) {
          const staged = await runRanks(
            size,
            kind,
            length,
            [
              [0, 5],
              [5, length],
            ],
            op,
            fill,
            { staging: true, blocking },
          );
          let same = true;
          for (let r = 0; r < size; r++)
            for (let i = 0; i < length; i++) if (!Object.is(staged.after[r][i], inPlace.after[r][i])) same = false;
          t.ok(
            same,
            `${size} ranks, ${op}, ${kind}, ${blocking ? 'blocking' : 'async'}: staged in chunks of 7 = read in ` +
              `place, bit for bit`,
          );
        }
        const i = 77;
        const values = Array.from({ length: size }, (_, r) => Math.fround(fill(r, i)));
        const want =
          op === 'max'
            ? Math.max(...values)
            : op === 'sum'
              ? values.reduce((a, b) => Math.fround(a + b))
              : Math.fround(values.reduce((a, b) => Math.fround(a + b)) / size);
        t.equal(inPlace.after[1][i], want, `${size} ranks, ${op}: element ${i} as computed by hand in rank order`);
      }
    }
  },
);

t.test(
  'small all-reduces back to back (one barrier each, halves alternating): the bits of the in-place form',
  async t => {
    // each call reduces a range of the last one's result: a rank that rewrote a half a slower rank still read would
    // change every later value
    const length = 64;
    const ranges: [number, number][] = Array.from({ length: 400 }, (_, k) => {
      const s = (k * 7) % 60;
      return [s, Math.min(length, s + 1 + ((k * 13) % 40))];
    });
    const fill = (r: number, i: number) => Math.sin(r * 2.3 + i * 0.7) * (r + 1);
    for (const size of [2, 3, 4])
      for (const op of ['sum', 'mean', 'max'] as const) {
        const inPlace = await runRanks(size, 'sharded', length, ranges, op, fill);
        const small = await runRanks(size, 'sharded', length, ranges, op, fill, { staging: true, blocking: true });
        let same = true;
        for (let r = 0; r < size; r++)
          for (let i = 0; i < length; i++) if (!Object.is(small.after[r][i], inPlace.after[r][i])) same = false;
        const moved = inPlace.after[0].some((v, i) => !Object.is(v, inPlace.before[0][i]));
        t.ok(same && moved, `${size} ranks, ${op}: 400 small all-reduces give the in-place bits on every rank`);
      }
  },
);

t.test('all-gather: every rank receives every part in rank order, staged in chunks', async t => {
  for (const size of [1, 2, 4]) {
    const { replies } = await runRanks(size, 'sharded', 50, [[10, 33]], 'allGather', (r, i) => r * 1000 + i, {
      staging: true,
    });
    for (let r = 0; r < size; r++) {
      const all = replies[r] as Float32Array;
      t.same(
        Array.from(all),
        Array.from({ length: size * 23 }, (_, k) => Math.floor(k / 23) * 1000 + 10 + (k % 23)),
        `${size} ranks: rank ${r}`,
      );
    }
  }
});
