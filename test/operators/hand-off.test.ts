// handOff: a ready group is handed to the device's comm thread through the
// real control block (Atomics store + notify on shared memory); the events
// themselves pass through untouched.
import t from 'tap';
import { TestScheduler } from 'rxjs/testing';
import { Subject } from 'rxjs';
import { handOff } from '../../src/pipeline/operators/hand-off.js';
import { ControlBlock } from '../../src/pipeline/control-block.js';
import type { GroupReady } from '../../src/pipeline/events.js';

const DEVICES = 3,
  GROUPS = 2;

function controlBlock(): ControlBlock {
  return new ControlBlock(new SharedArrayBuffer(ControlBlock.byteLength(DEVICES, GROUPS)), DEVICES, GROUPS, 5_000);
}

/** Every gradsReady and applied word of the block, as [device][group]. */
function words(control: ControlBlock): { gradsReady: number[][]; applied: number[][] } {
  const grid = (f: (d: number, g: number) => number) =>
    Array.from({ length: DEVICES }, (_, d) => Array.from({ length: GROUPS }, (_, g) => f(d, g)));
  return { gradsReady: grid((d, g) => control.gradsReady(d, g)), applied: grid((d, g) => control.applied(d, g)) };
}

const ready = (step: number, group: number, at = 0): GroupReady => ({ step, group, at });

t.test('events pass through unchanged, in order; errors and completion too', async t => {
  const control = controlBlock();
  new TestScheduler((actual, expected) => {
    t.strictSame(actual, expected);
  }).run(({ cold, expectObservable, expectSubscriptions }) => {
    const values = { a: ready(1, 1, 10), b: ready(1, 0, 20) };
    const done = cold('-a-b-|', values);
    expectObservable(done.pipe(handOff(control, 1))).toBe('-a-b-|', values);
    expectSubscriptions(done.subscriptions).toBe('^----!');

    const failed = cold('-a-#', { a: ready(1, 1) }, new Error('backward failed'));
    expectObservable(failed.pipe(handOff(control, 2))).toBe('-a-#', { a: ready(1, 1) }, new Error('backward failed'));
    expectSubscriptions(failed.subscriptions).toBe('^--!');
  });
  t.strictSame(
    words(control),
    {
      gradsReady: [
        [0, 0],
        [1, 1],
        [0, 1],
      ],
      applied: [
        [0, 0],
        [0, 0],
        [0, 0],
      ],
    },
    'each handed-off group of each device holds its step; other devices, groups and applied words are untouched',
  );
});

t.test('the word is published before the event moves on, to the step of the event (later steps overwrite)', async t => {
  const control = controlBlock();
  const source = new Subject<GroupReady>();
  const seenDownstream: { group: number; step: number; word: number }[] = [];
  const out = source.pipe(handOff(control, 0));
  const sameObjects: boolean[] = [];
  const sent: GroupReady[] = [];
  out.subscribe(g => {
    seenDownstream.push({ group: g.group, step: g.step, word: control.gradsReady(0, g.group) });
    sameObjects.push(g === sent[sent.length - 1]);
  });
  for (const g of [ready(1, 1), ready(1, 0), ready(2, 1), ready(2, 0), ready(3, 1)]) {
    sent.push(g);
    source.next(g);
  }
  t.strictSame(seenDownstream, [
    { group: 1, step: 1, word: 1 },
    { group: 0, step: 1, word: 1 },
    { group: 1, step: 2, word: 2 },
    { group: 0, step: 2, word: 2 },
    { group: 1, step: 3, word: 3 },
  ]);
  t.ok(sameObjects.every(Boolean), 'the very same event objects');
  t.equal(control.gradsReady(0, 0), 2, 'group 0 of device 0: step 2');
  t.equal(control.gradsReady(0, 1), 3, 'group 1 of device 0: step 3');
  t.equal(control.waitGradsReady(0, 1, 3, 'the test'), true, "the comm side's wait for step 3 is satisfied at once");
});

t.test('the hand-off notifies a waiter on the word (no polling needed)', async t => {
  const control = controlBlock();
  const source = new Subject<GroupReady>();
  source.pipe(handOff(control, 2)).subscribe();
  const before = Int32Array.from(control.words);
  source.next(ready(1, 1));
  const changed = before.map((w, i) => (w !== control.words[i] ? i : -1)).filter(i => i >= 0);
  t.equal(changed.length, 1, 'one word changed');
  const index = changed[0];
  t.equal(control.words[index], 1);
  // Wait on the word for its next change. Only a notify settles this wait 'ok'; without one nothing keeps the
  // process alive and tap reports the test unfinished (the 60 s timeout is only a way out, never reached).
  const wait = Atomics.waitAsync(control.words, index, 1, 60_000);
  t.equal(wait.async, true, 'the waiter is parked');
  source.next(ready(2, 1));
  t.equal(await wait.value, 'ok', 'woken by the hand-off');
  t.equal(control.gradsReady(2, 1), 2);
});

t.test('nothing is published after an error, nor for events that never came', async t => {
  const control = controlBlock();
  const source = new Subject<GroupReady>();
  let error: unknown;
  source.pipe(handOff(control, 1)).subscribe({
    error: e => {
      error = e;
    },
  });
  source.next(ready(1, 0));
  source.error(new Error('boom'));
  source.next(ready(2, 1));
  t.match(error, { message: 'boom' });
  t.strictSame(words(control).gradsReady, [
    [0, 0],
    [1, 0],
    [0, 0],
  ]);
});
