// `npm run bench -- hosts-repeat`: two hosts-bench runs compared row by row (bench/hosts-repeat.ts), on hand-made rows
// whose ratios are computed by hand; rows only one run has are left out; rows without a prediction carry none; two
// runs with nothing in common are refused by name.
import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { compareHostsRuns, runHostsRepeat } from '../bench/hosts-repeat.js';

type Row = Parameters<typeof compareHostsRuns>[0][number];
const row = (link: Row['link'], schedule: string, stepMs: number, predictedMs?: number): Row => ({
  model: 'alexnet-mini',
  link,
  schedule,
  stepMs,
  ...(predictedMs === undefined ? {} : { predictedMs }),
});

t.test("ratios of the same rows, in the first run's order", async t => {
  const first = [
    row('1gbit', 'sequential', 50, 40),
    row('1gbit', 'DDP', 100),
    row('100mbit', 'buckets', 200, 180),
    row('1gbit', 'only first', 10, 10),
  ];
  const second = [
    row('100mbit', 'buckets', 220, 162),
    row('1gbit', 'sequential', 40, 50),
    row('1gbit', 'DDP', 110),
    row('1gbit', 'only second', 1, 1),
  ];
  const got = compareHostsRuns(first, second);
  t.same(
    got.map(r => r.schedule),
    ['sequential', 'DDP', 'buckets'],
    "rows in both, first run's order",
  );
  t.same(got[0].measured, [50, 40]);
  t.equal(got[0].measuredRatio, 0.8);
  t.equal(got[0].predictedRatio, 1.25);
  t.equal(got[1].predicted, undefined, 'DDP: no prediction');
  t.ok(
    Math.abs(got[2].measuredRatio - 1.1) < 1e-12 && Math.abs(got[2].predictedRatio! - 0.9) < 1e-12,
    'buckets: 1.1 and 0.9',
  );
  t.same(compareHostsRuns(first, [row('10gbit', 'sequential', 1, 1)]), [], 'another link: nothing in common');
});

t.test('the command refuses runs with nothing in common, naming both files', async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hosts-repeat-'));
  const a = path.join(dir, 'a.json'),
    b = path.join(dir, 'b.json');
  writeFileSync(a, JSON.stringify({ date: 'x', rows: [row('1gbit', 'sequential', 1, 1)] }));
  writeFileSync(b, JSON.stringify({ date: 'y', rows: [row('100mbit', 'sequential', 1, 1)] }));
  t.throws(() => runHostsRepeat(a, b), {
    message: new RegExp(`${a.replaceAll('.', '\\.')} and ${b.replaceAll('.', '\\.')} have no row in common`),
  });
});
