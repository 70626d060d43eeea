// publishApplied: the comm side says a group's update is in the parameters,
// through the real control block (Atomics store + notify on shared memory);
// the compute side's next forward waits on these words.
import t from 'tap';
import { TestScheduler } from 'rxjs/testing';
import { Subject } from 'rxjs';
import { publishApplied } from '../../src/pipeline/operators/publish-applied.js';
import { ControlBlock } from '../../src/pipeline/control-block.js';
import type { GroupExchange } from '../../src/pipeline/events.js';

const DEVICES = 2,
  GROUPS = 3;

function controlBlock(): ControlBlock {
  return new ControlBlock(new SharedArrayBuffer(ControlBlock.byteLength(DEVICES, GROUPS)), DEVICES, GROUPS, 5_000);
}

/** Every gradsReady and applied word of the block, as [device][group]. */
function words(control: ControlBlock): { gradsReady: number[][]; applied: number[][] } {
  const grid = (f: (d: number, g: number) => number) =>
    Array.from({ length: DEVICES }, (_, d) => Array.from({ length: GROUPS }, (_, g) => f(d, g)));
  return { gradsReady: grid((d, g) => control.gradsReady(d, g)), applied: grid((d, g) => control.applied(d, g)) };
}

const unit = (step: number, group: number, extra: Partial<GroupExchange> = {}): GroupExchange => ({
  step,
  group,
  waitStart: 1,
  waitEnd: 2,
  exchangeStart: 3,
  exchangeEnd: 4,
  applyStart: 5,
  applyEnd: 6,
  ...extra,
});

t.test('units pass through unchanged, in order; errors and completion too', async t => {
  const control = controlBlock();
  new TestScheduler((actual, expected) => {
    t.strictSame(actual, expected);
  }).run(({ cold, expectObservable, expectSubscriptions }) => {
    const values = { a: unit(4, 2), b: unit(4, 0), c: unit(4, 1, { skipped: true }) };
    const done = cold('-a-b-c|', values);
    expectObservable(done.pipe(publishApplied(control, 1))).toBe('-a-b-c|', values);
    expectSubscriptions(done.subscriptions).toBe('^-----!');

    const failed = cold('-a-#', { a: unit(7, 0) }, new Error('update failed'));
    expectObservable(failed.pipe(publishApplied(control, 0))).toBe(
      '-a-#',
      { a: unit(7, 0) },
      new Error('update failed'),
    );
    expectSubscriptions(failed.subscriptions).toBe('^--!');
  });
  t.strictSame(
    words(control),
    {
      gradsReady: [
        [0, 0, 0],
        [0, 0, 0],
      ],
      applied: [
        [7, 0, 0],
        [4, 4, 4],
      ],
    },
    'each applied group of each device holds its step; a skipped update is published too; gradsReady untouched',
  );
});

t.test("the word is published before the unit moves on, to the unit's step (later steps overwrite)", async t => {
  const control = controlBlock();
  const source = new Subject<GroupExchange>();
  const seen: { group: number; step: number; word: number }[] = [];
  source
    .pipe(publishApplied(control, 0))
    .subscribe(u => seen.push({ group: u.group, step: u.step, word: control.applied(0, u.group) }));
  for (const u of [unit(1, 0), unit(1, 1), unit(1, 2), unit(2, 0), unit(2, 1, { skipped: true })]) source.next(u);
  t.strictSame(seen, [
    { group: 0, step: 1, word: 1 },
    { group: 1, step: 1, word: 1 },
    { group: 2, step: 1, word: 1 },
    { group: 0, step: 2, word: 2 },
    { group: 1, step: 2, word: 2 },
  ]);
  t.strictSame([control.applied(0, 0), control.applied(0, 1), control.applied(0, 2)], [2, 2, 1]);
  t.equal(control.waitApplied(0, 1, 2, 'the test'), true, "the compute side's wait for step 2 is satisfied at once");
  t.strictSame(words(control).applied[1], [0, 0, 0], 'the other device is untouched');
});

t.test(
  "a waiter on the word is notified; the main thread's async wait resolves once every group is applied",
  async t => {
    const control = controlBlock();
    const source = new Subject<GroupExchange>();
    source.pipe(publishApplied(control, 1)).subscribe();
    const before = Int32Array.from(control.words);
    source.next(unit(1, 2));
    const changed = before.map((w, i) => (w !== control.words[i] ? i : -1)).filter(i => i >= 0);
    t.equal(changed.length, 1, 'one word changed');
    const index = changed[0];
    // Wait on the word for its next change. Only a notify settles this wait 'ok'; without one nothing keeps the
    // process alive and tap reports the test unfinished (the 60 s timeout is only a way out, never reached).
    const wait = Atomics.waitAsync(control.words, index, 1, 60_000);
    t.equal(wait.async, true, 'the waiter is parked');
    source.next(unit(2, 2));
    t.equal(await wait.value, 'ok', 'woken by publishApplied');

    let resolved = 0;
    const all = Promise.all(
      [0, 1, 2].map(g =>
        control.waitAppliedAsync(1, g, 3).then(() => {
          resolved++;
        }),
      ),
    );
    source.next(unit(3, 0));
    source.next(unit(3, 1));
    t.equal(resolved, 0, 'nothing resolved synchronously');
    source.next(unit(3, 2));
    await all;
    t.equal(resolved, 3, 'every group of step 3 reported applied');
  },
);

t.test('nothing is published after an error', async t => {
  const control = controlBlock();
  const source = new Subject<GroupExchange>();
  let error: unknown;
  source.pipe(publishApplied(control, 0)).subscribe({
    error: e => {
      error = e;
    },
  });
  source.next(unit(1, 1));
  source.error(new Error('boom'));
  source.next(unit(2, 2));
  t.match(error, { message: 'boom' });
  t.strictSame(words(control).applied, [
    [0, 1, 0],
    [0, 0, 0],
  ]);
});
