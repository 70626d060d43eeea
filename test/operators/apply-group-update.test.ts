// applyGroupUpdate: one averaged group's optimizer update, applied to this
// device's parameters in shared memory. Every update is also computed a second
// way here (by hand in float64, or exactly on dyadic values) and compared.
import t from 'tap';
import { Subject } from 'rxjs';
import { applyGroupUpdate } from '../../src/pipeline/operators/apply-group-update.js';
import { JS_ARITHMETIC, type FlatArithmetic } from '../../src/optim/flat-arithmetic.js';
import type { OptimizerConfig } from '../../src/optim/flat-optimizer.js';
import type { ParameterGroup } from '../../src/model/parameter-layout.js';
import type { GroupExchange } from '../../src/pipeline/events.js';

const N = 12;
const groups: ParameterGroup[] = [
  { name: 'fc', start: 0, end: 5 },
  { name: 'conv', start: 5, end: 12 },
];

/** A Float32Array on shared memory, as the device slots are. */
function shared(values: ArrayLike<number>): Float32Array {
  const a = new Float32Array(new SharedArrayBuffer(values.length * 4));
  a.set(Array.from(values));
  return a;
}

/** mulberry32: deterministic values for the tests. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const unit = (step: number, group: number): GroupExchange => ({
  step,
  group,
  waitStart: 1,
  waitEnd: 2,
  exchangeStart: 3,
  exchangeEnd: 4,
});

/** Pushes units through the operator; returns what came out, with the error or completion. */
function run(op: ReturnType<typeof applyGroupUpdate>, units: GroupExchange[]) {
  const source = new Subject<GroupExchange>();
  const out: GroupExchange[] = [];
  let error: unknown,
    completed = false;
  source.pipe(op).subscribe({
    next: u => out.push(u),
    error: e => {
      error = e;
    },
    complete: () => {
      completed = true;
    },
  });
  for (const u of units) source.next(u);
  if (error === undefined) source.complete();
  return { out, error, completed };
}

const bits = (a: Float32Array, from = 0, to = a.length) =>
  Array.from(a.subarray(from, to), v => (Object.is(v, -0) ? '-0' : String(v)));

/** Largest |a - b| / max(1, |b|) over a range. */
function worst(a: ArrayLike<number>, b: ArrayLike<number>, from: number, to: number): number {
  let w = 0;
  for (let i = from; i < to; i++) w = Math.max(w, Math.abs(a[i] - b[i]) / Math.max(1, Math.abs(b[i])));
  return w;
}

t.test('plain SGD on dyadic values: exactly params - lr * grads over the group, nothing outside it', async t => {
  const params = shared(Array.from({ length: N }, (_, i) => i * 0.25));
  const grads = shared(Array.from({ length: N }, (_, i) => (i - 6) * 0.125));
  const sgd: OptimizerConfig = { kind: 'sgd', lr: 0.5, momentum: 0 };
  const { out, completed } = run(applyGroupUpdate(sgd, params, grads, [], groups), [unit(1, 1)]);
  // exact in float32
  const expected = Array.from({ length: N }, (_, i) => (i >= 5 ? i * 0.25 - 0.5 * (i - 6) * 0.125 : i * 0.25));
  t.strictSame(Array.from(params), expected, 'conv updated exactly, fc untouched');
  t.strictSame(
    Array.from(grads),
    Array.from({ length: N }, (_, i) => (i - 6) * 0.125),
    'gradients untouched',
  );
  t.equal(out.length, 1);
  t.equal(completed, true);
});

t.test(
  'SGD with momentum over two steps = the textbook rule in float64 (and the accumulator only moves in the group)',
  async t => {
    const r = random(1);
    const p0 = Array.from({ length: N }, () => r() * 2 - 1);
    const g1 = Array.from({ length: N }, () => r() - 0.5),
      g2 = Array.from({ length: N }, () => r() - 0.5);
    const params = shared(p0),
      grads = shared(g1),
      acc = shared(new Array(N).fill(0));
    const before = Float32Array.from(params);
    const cfg: OptimizerConfig = { kind: 'sgd', lr: 0.1, momentum: 0.9 };
    const grads$ = new Subject<GroupExchange>();
    grads$.pipe(applyGroupUpdate(cfg, params, grads, [acc], groups)).subscribe();
    grads$.next(unit(1, 0));
    grads.set(shared(g2));
    grads$.next(unit(2, 0));

    // Second way: float64, from the float32 inputs.
    const f32 = (a: number[]) => Array.from(Float32Array.from(a));
    const p = f32(p0),
      a1 = f32(g1),
      a2 = f32(g2);
    const ref = p.slice(),
      v = new Array(N).fill(0);
    for (const g of [a1, a2])
      for (let i = 0; i < 5; i++) {
        v[i] = 0.9 * v[i] + g[i];
        ref[i] -= 0.1 * v[i];
      }
    const w = worst(params, ref, 0, 5);
    t.ok(w < 1e-6, `fc: max relative difference ${w.toExponential(2)}`);
    t.ok(worst(acc, v, 0, 5) < 1e-6, 'the accumulator holds the float64 velocity');
    t.strictSame(bits(params, 5), bits(before, 5), 'conv parameters untouched');
    t.strictSame(bits(acc, 5), bits(shared(new Array(N).fill(0)), 5), 'conv accumulator untouched');
  },
);

t.test("Adam = the textbook rule in float64, with the bias corrections of the unit's step", async t => {
  const r = random(2);
  const p0 = Array.from({ length: N }, () => r() * 2 - 1);
  const gs = [0, 1, 2].map(() => Array.from({ length: N }, () => (r() - 0.5) * 0.3));
  const params = shared(p0),
    grads = shared(gs[0]),
    m = shared(new Array(N).fill(0)),
    v = shared(new Array(N).fill(0));
  const before = Float32Array.from(params);
  const cfg = { kind: 'adam', lr: 0.01, beta1: 0.9, beta2: 0.999, epsilon: 1e-7 } as const;
  const source = new Subject<GroupExchange>();
  const out: GroupExchange[] = [];
  source.pipe(applyGroupUpdate(cfg, params, grads, [m, v], groups)).subscribe(u => out.push(u));
  // Steps 4, 5, 6 (a resumed run): the bias corrections must come from the unit's step, not a count of calls.
  const steps = [4, 5, 6];
  steps.forEach((step, k) => {
    grads.set(gs[k]);
    source.next(unit(step, 1));
  });

  const ref = Array.from(Float32Array.from(p0)),
    rm = new Array(N).fill(0),
    rv = new Array(N).fill(0);
  steps.forEach((step, k) => {
    const g = Array.from(Float32Array.from(gs[k]));
    for (let i = 5; i < N; i++) {
      rm[i] = 0.9 * rm[i] + 0.1 * g[i];
      rv[i] = 0.999 * rv[i] + 0.001 * g[i] * g[i];
      const mHat = rm[i] / (1 - 0.9 ** step),
        vHat = rv[i] / (1 - 0.999 ** step);
      ref[i] -= (0.01 * mHat) / (Math.sqrt(vHat) + 1e-7);
    }
  });
  const w = worst(params, ref, 5, N);
  t.ok(w < 2e-6, `conv: max relative difference to float64 Adam ${w.toExponential(2)}`);
  t.ok(worst(m, rm, 5, N) < 1e-6 && worst(v, rv, 5, N) < 1e-6, 'first and second moments agree');
  // Had step 1..3 been used, the first update alone would differ by far more than the tolerance.
  t.ok(Math.abs(params[7] - before[7]) > 1e-4, 'the parameters moved');
  t.strictSame(bits(params, 0, 5), bits(before, 0, 5), 'fc parameters untouched');
  t.strictSame([...bits(m, 0, 5), ...bits(v, 0, 5)], new Array(10).fill('0'), 'fc optimizer state untouched');
  t.strictSame(
    out.map(u => u.step),
    steps,
  );
});

t.test(
  'each unit updates its own group; units come out in order with apply times and every other field kept',
  async t => {
    const params = shared(new Array(N).fill(1)),
      grads = shared(new Array(N).fill(1));
    const { out, completed, error } = run(
      applyGroupUpdate({ kind: 'sgd', lr: 0.25, momentum: 0 }, params, grads, [], groups),
      [unit(1, 1), unit(1, 0), unit(2, 1)],
    );
    t.strictSame(Array.from(params), [...new Array(5).fill(0.75), ...new Array(7).fill(0.5)], 'conv twice, fc once');
    t.strictSame(
      out.map(u => [u.step, u.group]),
      [
        [1, 1],
        [1, 0],
        [2, 1],
      ],
    );
    for (const u of out) {
      t.strictSame(
        { waitStart: u.waitStart, waitEnd: u.waitEnd, exchangeStart: u.exchangeStart, exchangeEnd: u.exchangeEnd },
        { waitStart: 1, waitEnd: 2, exchangeStart: 3, exchangeEnd: 4 },
      );
      t.type(u.applyStart, 'number');
      t.ok(u.applyEnd! >= u.applyStart!, 'applyEnd >= applyStart');
      t.equal(u.skipped, undefined, 'not skipped');
    }
    t.equal(completed, true);
    t.equal(error, undefined);
  },
);

t.test(
  'skipNonFinite: a group whose average holds NaN or ±Infinity is skipped, untouched, and marked; the others apply',
  async t => {
    for (const bad of [NaN, Infinity, -Infinity]) {
      const params = shared(new Array(N).fill(2)),
        grads = shared(new Array(N).fill(1));
      const m = shared(new Array(N).fill(0)),
        v = shared(new Array(N).fill(0));
      grads[6] = bad; // in conv
      const adam: OptimizerConfig = { kind: 'adam', lr: 0.5, beta1: 0.9, beta2: 0.999, epsilon: 1e-7 };
      const { out } = run(applyGroupUpdate(adam, params, grads, [m, v], groups, true), [unit(1, 1), unit(1, 0)]);
      t.equal(out[0].skipped, true, `${bad} in conv: conv skipped`);
      t.type(out[0].applyStart, 'number');
      t.ok(out[0].applyEnd! >= out[0].applyStart!, 'apply times still set');
      t.strictSame(bits(params, 5), new Array(7).fill('2'), 'conv parameters untouched');
      t.strictSame([...bits(m, 5), ...bits(v, 5)], new Array(14).fill('0'), 'conv optimizer state untouched');
      t.equal(out[1].skipped, undefined, `${bad} in conv does not skip fc`);
      // Adam's first step moves each parameter by about lr * sign(g): 2 - 0.5 (up to epsilon and the
      // float32 bias corrections, ~1e-5).
      t.ok(
        bits(params, 0, 5).every(x => Math.abs(Number(x) - 1.5) < 1e-4),
        `fc applied: ${bits(params, 0, 5).join(', ')}`,
      );
    }
  },
);

t.test('without skipNonFinite (the default) a non-finite gradient is applied as is', async t => {
  const params = shared(new Array(N).fill(2)),
    grads = shared(new Array(N).fill(1));
  grads[1] = NaN;
  const { out } = run(applyGroupUpdate({ kind: 'sgd', lr: 1, momentum: 0 }, params, grads, [], groups), [unit(1, 0)]);
  t.equal(out[0].skipped, undefined);
  t.ok(Number.isNaN(params[1]), 'the NaN reached the parameter');
  t.strictSame([params[0], params[2], params[3], params[4]], [1, 1, 1, 1], 'the rest of fc applied');
  t.strictSame(bits(params, 5), new Array(7).fill('2'), 'conv untouched');
});

t.test(
  "the given arithmetic runs the update, with the group's range and the unit's step; never for a skipped group",
  async t => {
    const calls: { start: number; end: number; step: number; sameBuffers: boolean }[] = [];
    const params = shared(new Array(N).fill(0)),
      grads = shared(new Array(N).fill(1)),
      state: Float32Array[] = [];
    const cfg: OptimizerConfig = { kind: 'sgd', lr: 1, momentum: 0 };
    const recording: FlatArithmetic = {
      name: 'js',
      reduceMeanInto: JS_ARITHMETIC.reduceMeanInto,
      applyUpdate(c, p, g, s, start, end, step) {
        calls.push({ start, end, step, sameBuffers: c === cfg && p === params && g === grads && s === state });
        JS_ARITHMETIC.applyUpdate(c, p, g, s, start, end, step);
      },
    };
    grads[0] = Infinity;
    const { out } = run(applyGroupUpdate(cfg, params, grads, state, groups, true, recording), [
      unit(3, 1),
      unit(3, 0),
      unit(4, 1),
    ]);
    t.strictSame(calls, [
      { start: 5, end: 12, step: 3, sameBuffers: true },
      { start: 5, end: 12, step: 4, sameBuffers: true },
    ]);
    t.strictSame(
      out.map(u => u.skipped ?? false),
      [false, true, false],
    );
    t.strictSame(bits(params, 5), new Array(7).fill('-2'), 'conv applied twice by the given arithmetic');
  },
);

t.test('an update that throws errors the stream; a source error passes through; nothing after either', async t => {
  const params = shared(new Array(N).fill(0)),
    grads = shared(new Array(N).fill(1));
  const failing: FlatArithmetic = {
    ...JS_ARITHMETIC,
    applyUpdate() {
      throw new Error('update failed');
    },
  };
  const thrown = run(applyGroupUpdate({ kind: 'sgd', lr: 1, momentum: 0 }, params, grads, [], groups, false, failing), [
    unit(1, 0),
    unit(1, 1),
  ]);
  t.match(thrown.error, { message: 'update failed' });
  t.equal(thrown.out.length, 0);
  t.equal(thrown.completed, false);

  const source = new Subject<GroupExchange>();
  const out: GroupExchange[] = [];
  let error: unknown;
  source.pipe(applyGroupUpdate({ kind: 'sgd', lr: 1, momentum: 0 }, params, grads, [], groups)).subscribe({
    next: u => out.push(u),
    error: e => {
      error = e;
    },
  });
  source.next(unit(1, 0));
  source.error(new Error('exchange failed'));
  source.next(unit(1, 1));
  t.match(error, { message: 'exchange failed' });
  t.strictSame(
    out.map(u => u.group),
    [0],
  );
  t.strictSame(
    Array.from(params),
    [...new Array(5).fill(-1), ...new Array(7).fill(0)],
    'only the unit before the error was applied',
  );
});
