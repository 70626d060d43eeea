// completeGroups: a GroupReady the moment the last float of an exchange group
// has arrived, per step; marble specs in the style of RxJS's own operator specs.
import t from 'tap';
import { TestScheduler } from 'rxjs/testing';
import { Subject } from 'rxjs';
import { completeGroups } from '../../src/pipeline/operators/complete-groups.js';
import type { GradientReady, GroupReady } from '../../src/pipeline/events.js';
import type { ParameterGroup } from '../../src/model/parameter-layout.js';

type Asserts = Pick<typeof t, 'strictSame'>;

/** A TestScheduler whose frames are compared with tap (fails the test on any difference). */
function marbles(t: Asserts): TestScheduler {
  return new TestScheduler((actual, expected) => {
    t.strictSame(actual, expected);
  });
}

// Two groups in transmission order: `fc` = floats [0, 4), `conv` = floats [4, 10).
const groups: ParameterGroup[] = [
  { name: 'fc', start: 0, end: 4 },
  { name: 'conv', start: 4, end: 10 },
];

const grad = (step: number, start: number, end: number, at: number): GradientReady => ({
  step,
  start,
  end,
  layer: `l${start}-${end}`,
  at,
});
const ready = (step: number, group: number, at: number): GroupReady => ({ step, group, at });

t.test('a group is ready when its last gradient arrives, not before; several gradients per group', async t => {
  marbles(t).run(({ cold, expectObservable, expectSubscriptions }) => {
    const source = cold('-a-b-c-d|', {
      a: grad(1, 0, 1, 10),
      b: grad(1, 1, 4, 20), // fc in two pieces
      c: grad(1, 4, 7, 30),
      d: grad(1, 7, 10, 40), // conv in two pieces
    });
    expectObservable(source.pipe(completeGroups(groups))).toBe('---x---y|', { x: ready(1, 0, 20), y: ready(1, 1, 40) });
    expectSubscriptions(source.subscriptions).toBe('^-------!');
  });
});

t.test('out-of-order arrival: groups complete in the order their last piece arrives, `at` of that piece', async t => {
  marbles(t).run(({ cold, expectObservable }) => {
    const source = cold('-a-b-c-d-e|', {
      a: grad(1, 8, 10, 1),
      b: grad(1, 2, 4, 2),
      c: grad(1, 4, 8, 3), // conv's last piece arrives before fc's
      d: grad(1, 0, 1, 4),
      e: grad(1, 1, 2, 5),
    });
    expectObservable(source.pipe(completeGroups(groups))).toBe('-----x---y|', { x: ready(1, 1, 3), y: ready(1, 0, 5) });
  });
});

t.test('a gradient whose range overlaps two groups counts towards both', async t => {
  marbles(t).run(({ cold, expectObservable }) => {
    const across = cold('-a-m-z|', { a: grad(1, 0, 2, 1), m: grad(1, 2, 6, 2), z: grad(1, 6, 10, 3) });
    expectObservable(across.pipe(completeGroups(groups))).toBe('---x-y|', { x: ready(1, 0, 2), y: ready(1, 1, 3) });

    // One gradient covering everything completes both groups in the same frame, in group order.
    const whole = cold('-w---|', { w: grad(2, 0, 10, 7) }); // a group '(xy)' spans 4 frames
    expectObservable(whole.pipe(completeGroups(groups))).toBe('-(xy)|', { x: ready(2, 0, 7), y: ready(2, 1, 7) });

    // A gradient that ends exactly at a group boundary does not touch the next group.
    const edge = cold('-f-g|', { f: grad(3, 0, 4, 1), g: grad(3, 4, 10, 2) });
    expectObservable(edge.pipe(completeGroups(groups))).toBe('-x-y|', { x: ready(3, 0, 1), y: ready(3, 1, 2) });
  });
});

t.test('the count of missing floats resets at each new step', async t => {
  marbles(t).run(({ cold, expectObservable }) => {
    // Step 1 never completes fc (floats [2, 4) missing); step 2's [2, 4) must not complete it.
    const source = cold('-a-c-B-A-C|', {
      a: grad(1, 0, 2, 1),
      c: grad(1, 4, 10, 2),
      B: grad(2, 2, 4, 3),
      A: grad(2, 0, 2, 4),
      C: grad(2, 4, 10, 5),
    });
    expectObservable(source.pipe(completeGroups(groups))).toBe('---x---y-z|', {
      x: ready(1, 1, 2),
      y: ready(2, 0, 4),
      z: ready(2, 1, 5),
    });
  });
});

t.test('every step emits every group again; the same gradient in the next step is no duplicate', async t => {
  marbles(t).run(({ cold, expectObservable }) => {
    const source = cold('-a-b-c-d|', {
      a: grad(1, 0, 4, 1),
      b: grad(1, 4, 10, 2),
      c: grad(2, 0, 4, 3),
      d: grad(2, 4, 10, 4),
    });
    expectObservable(source.pipe(completeGroups(groups))).toBe('-w-x-y-z|', {
      w: ready(1, 0, 1),
      x: ready(1, 1, 2),
      y: ready(2, 0, 3),
      z: ready(2, 1, 4),
    });
  });
});

t.test('state lives in the subscription: two subscribers of one pipeline count separately', async t => {
  marbles(t).run(({ cold, expectObservable }) => {
    const ready$ = cold('-a-b|', { a: grad(1, 0, 4, 1), b: grad(1, 4, 10, 2) }).pipe(completeGroups(groups));
    expectObservable(ready$).toBe('-x-y|', { x: ready(1, 0, 1), y: ready(1, 1, 2) });
    expectObservable(ready$).toBe('-x-y|', { x: ready(1, 0, 1), y: ready(1, 1, 2) });
  });
});

t.test(
  'a gradient received twice in a step errors the stream, naming the group and step, and unsubscribes the source',
  async t => {
    const source = new Subject<GradientReady>();
    const seen: GroupReady[] = [];
    let error: unknown,
      completed = false;
    source.pipe(completeGroups(groups)).subscribe({
      next: g => seen.push(g),
      error: e => {
        error = e;
      },
      complete: () => {
        completed = true;
      },
    });
    source.next(grad(4, 0, 4, 1));
    source.next(grad(4, 4, 6, 2));
    t.equal(error, undefined, 'no error before the duplicate');
    source.next(grad(4, 0, 4, 3)); // fc again
    t.type(error, Error);
    t.match((error as Error).message, /group fc received a gradient twice in step 4/);
    t.strictSame(seen, [ready(4, 0, 1)], 'only the group completed before the duplicate was emitted');
    t.equal(source.observed, false, 'the source subscription was torn down');
    source.next(grad(4, 6, 10, 4));
    t.strictSame(seen, [ready(4, 0, 1)], 'nothing after the error');
    t.equal(completed, false);
  },
);

t.test('a duplicate overlapping a completed group errors too (part of a gradient)', async t => {
  marbles(t).run(({ cold, expectObservable, expectSubscriptions }) => {
    const source = cold('-a-b-c|', { a: grad(1, 4, 10, 1), b: grad(1, 0, 4, 2), c: grad(1, 3, 5, 3) });
    expectObservable(source.pipe(completeGroups(groups))).toBe(
      '-y-x-#',
      { x: ready(1, 0, 2), y: ready(1, 1, 1) },
      new Error('group fc received a gradient twice in step 1'),
    );
    expectSubscriptions(source.subscriptions).toBe('^----!');
  });
});

t.test('errors and completion of the source pass through; a half-complete group is not emitted', async t => {
  marbles(t).run(({ cold, expectObservable, expectSubscriptions }) => {
    const failing = cold('-a-b-#', { a: grad(1, 0, 4, 1), b: grad(1, 4, 6, 2) }, new Error('backward failed'));
    expectObservable(failing.pipe(completeGroups(groups))).toBe(
      '-x---#',
      { x: ready(1, 0, 1) },
      new Error('backward failed'),
    );
    expectSubscriptions(failing.subscriptions).toBe('^----!');

    const half = cold('-a-b|', { a: grad(1, 0, 2, 1), b: grad(1, 4, 9, 2) });
    expectObservable(half.pipe(completeGroups(groups))).toBe('----|');

    const empty = cold<GradientReady>('|');
    expectObservable(empty.pipe(completeGroups(groups))).toBe('|');
  });
});

t.test('unsubscribing from the result unsubscribes from the source', async t => {
  marbles(t).run(({ hot, expectObservable, expectSubscriptions }) => {
    const source = hot('-a-b-c-d|', {
      a: grad(1, 0, 4, 1),
      b: grad(1, 4, 10, 2),
      c: grad(2, 0, 4, 3),
      d: grad(2, 4, 10, 4),
    });
    expectObservable(source.pipe(completeGroups(groups)), '^--!').toBe('-x-', { x: ready(1, 0, 1) });
    expectSubscriptions(source.subscriptions).toBe('^--!');
  });
});

t.test('a duplicate arriving before its group completes is caught', async t => {
  marbles(t).run(({ cold, expectObservable }) => {
    const source = cold('-a-a|', { a: grad(1, 0, 2, 1) });
    expectObservable(source.pipe(completeGroups(groups))).toBe(
      '---#',
      undefined,
      new Error('group fc received a gradient twice in step 1'),
    );
  });
});
