// The scaling bench's compute-thread breakdown, on hand-made spans: period, busy time and the gap between steps,
// computed by hand; a group's backward span is not counted twice; the warm-up steps are left out.
import t from 'tap';
import { computeThreadSteps } from '../bench/step-gaps.js';
import type { Span } from '../src/index.js';

const span = (step: number, kind: Span['kind'], start: number, end: number, extra: Partial<Span> = {}): Span => ({
  device: 0,
  thread: 'compute',
  kind,
  name: kind,
  step,
  start,
  end,
  ...extra,
});

t.test('period, busy and gap per step', async t => {
  const spans: Span[] = [];
  for (let s = 1; s <= 4; s++) {
    // steps every 100 ms: load 2, forward 30, backward 60 (a group's 20 of it again), then an 8 ms gap
    const t0 = 100 * s;
    spans.push(
      span(s, 'load', t0, t0 + 2),
      span(s, 'forward', t0 + 2, t0 + 32),
      span(s, 'backward', t0 + 32, t0 + 92),
      span(s, 'backward', t0 + 72, t0 + 92, { group: 0 }),
      span(s, 'exchange', t0 + 50, t0 + 99, { thread: 'comm' }),
      span(s, 'load', t0, t0 + 50, { device: 1 }),
    );
  }
  const got = computeThreadSteps(spans, 0, 1)!;
  t.equal(got.steps, 3, 'steps 2-4 (step 1 is warm-up)');
  t.equal(got.busyMs, 92, "2 + 30 + 60, the group's backward and the comm thread not counted");
  t.equal(got.gapMs, 8, "8 ms from one step's backward to the next load");
  t.equal(got.periodMs, 100, "from step 2's start to step 4's, per step");
  t.equal(computeThreadSteps(spans, 0, 3), undefined, 'one step: no period');
});
