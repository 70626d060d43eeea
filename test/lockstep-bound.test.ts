// The scaling bench's lockstep bound (bench/lockstep-bound.ts), computed two ways: the paired step by its sorted-suffix
// sum against every pair summed by hand (O(n²)); for normal step times, against the model's form mean + e(2)·σ
// (src/profiling/lockstep.ts); equal constant steps bound nothing (1); and the per-step periods it is fed
// (bench/step-gaps.ts stepPeriods) from hand-made spans.
import t from 'tap';
import { lockstepBound } from '../bench/lockstep-bound.js';
import { stepPeriods } from '../bench/step-gaps.js';
import { expectedMaxOfNormals } from '../src/profiling/lockstep.js';
import type { Span } from '../src/index.js';
import { normals } from './fixtures/normal-draws.js';

t.test('the paired step against every pair summed', async t => {
  const draw = normals(11);
  const a = Array.from({ length: 301 }, () => 40 + 8 * draw());
  const b = Array.from({ length: 257 }, () => 37 + 6 * draw()).concat([40, 40, a[3]]); // ties with a
  let sum = 0;
  for (const x of a) for (const y of b) sum += Math.max(x, y);
  const got = lockstepBound(a, b)!;
  t.ok(
    Math.abs(got.pairedStepMs - sum / (a.length * b.length)) < 1e-9,
    `${got.pairedStepMs} against ${sum / (a.length * b.length)}`,
  );
  const meanA = a.reduce((s, x) => s + x, 0) / a.length,
    meanB = b.reduce((s, x) => s + x, 0) / b.length;
  t.ok(
    Math.abs(got.bound - 2 / got.pairedStepMs / (1 / meanA + 1 / meanB)) < 1e-12,
    'bound: lockstep steps against the two rates',
  );
  t.ok(got.bound < 1, `spread steps bound below 1: ${got.bound.toFixed(3)}`);
});

t.test('normal step times: the model form mean + e(2)·σ', async t => {
  const draw = normals(5);
  const mean = 40,
    sigma = 8;
  const a = Array.from({ length: 4000 }, () => mean + sigma * draw());
  const b = Array.from({ length: 4000 }, () => mean + sigma * draw());
  const got = lockstepBound(a, b)!;
  const model = mean + expectedMaxOfNormals(2) * sigma;
  t.ok(
    Math.abs(got.pairedStepMs - model) < 0.25,
    `paired ${got.pairedStepMs.toFixed(3)} ms, model ${model.toFixed(3)}`,
  );
  t.ok(
    Math.abs(got.spread[0] - sigma / mean) < 0.01,
    `spread ${got.spread[0].toFixed(4)} of the mean, drawn with ${sigma / mean}`,
  );
  t.ok(Math.abs(got.bound - mean / model) < 0.01, `bound ${got.bound.toFixed(4)} against ${(mean / model).toFixed(4)}`);
});

t.test('steady steps bound nothing; no steps, no bound', async t => {
  const got = lockstepBound([30, 30, 30], [30, 30])!;
  t.equal(got.pairedStepMs, 30);
  t.equal(got.bound, 1);
  t.same(got.spread, [0, 0]);
  t.equal(lockstepBound([], [30]), undefined);
  t.equal(lockstepBound([30], []), undefined);
});

t.test('stepPeriods: start to start on one compute thread, after the warm-up', async t => {
  const span = (step: number, start: number, extra: Partial<Span> = {}): Span => ({
    device: 0,
    thread: 'compute',
    kind: 'forward',
    name: 'forward',
    step,
    start,
    end: start + 5,
    ...extra,
  });
  const spans = [
    span(1, 0),
    span(2, 30),
    span(2, 29, { kind: 'load' }),
    span(3, 70),
    span(4, 100),
    span(3, 65, { device: 1 }),
    span(3, 60, { thread: 'comm', kind: 'exchange' }),
    span(5, 145),
  ];
  t.same(
    stepPeriods(spans, 0, 1),
    [41, 30, 45],
    "steps 2-5: each from its first span (step 2's load at 29); device 1 and the comm thread not counted",
  );
  t.same(stepPeriods(spans, 1, 0), [], 'one step: no period');
});
