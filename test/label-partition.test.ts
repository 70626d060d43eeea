// Label partitions: disjoint, complete, balanced; clear errors otherwise.
import t from 'tap';
import { LabelPartition } from '../src/classifier/label-partition.js';

t.test('contiguous partitions for C from N to 1e6 and N from 1 to 8', async t => {
  for (let n = 1; n <= 8; n++) {
    for (const c of [n, n + 1, 2 * n - 1, 10, 1000, 99_991, 1_000_000].filter(c => c >= n)) {
      const p = LabelPartition.contiguous(c, n);
      const sizes = p.labels.map(l => l.length);
      let covered = 0,
        disjoint = true;
      const seen = new Uint8Array(c);
      p.labels.forEach((ls, d) =>
        ls.forEach((label, i) => {
          if (seen[label]) disjoint = false;
          seen[label] = 1;
          covered++;
          if (p.owner[label] !== d || p.localIndex[label] !== i) disjoint = false;
        }),
      );
      if (!(disjoint && covered === c && Math.max(...sizes) - Math.min(...sizes) <= 1 && Math.min(...sizes) >= 1)) {
        t.fail(`C=${c} N=${n}: sizes ${sizes.join(',')}`);
      }
    }
  }
  t.pass('every partition disjoint, complete, balanced within one');
  t.same(
    LabelPartition.contiguous(10, 3).labels.map(l => Array.from(l)),
    [
      [0, 1, 2, 3],
      [4, 5, 6],
      [7, 8, 9],
    ],
  );
});

t.test('errors name the problem', async t => {
  t.throws(() => LabelPartition.contiguous(3, 4), {
    code: 'BAD_CONFIG',
    message: /cannot share 3 classes among 4 devices/,
  });
  t.throws(
    () =>
      LabelPartition.fromShares(4, [
        [0, 1],
        [1, 2, 3],
      ]),
    { message: /label 1 is owned by device 0 and device 1/ },
  );
  t.throws(() => LabelPartition.fromShares(4, [[0, 1], [2]]), { message: /label 3 is owned by no device/ });
  t.throws(() => LabelPartition.fromShares(4, [[0, 1, 2, 3], []]), { message: /device 1 owns no labels/ });
  t.throws(
    () =>
      LabelPartition.fromShares(4, [
        [0, 7],
        [1, 2, 3],
      ]),
    { message: /label 7, outside \[0, 4\)/ },
  );
  const p = LabelPartition.fromShares(4, [
    [3, 0],
    [2, 1],
  ]);
  t.equal(p.localIndex[0], 1);
  t.equal(p.owner[2], 1);
});
