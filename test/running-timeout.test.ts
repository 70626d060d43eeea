// runningTimeout counts the time the process ran, not the wall time: after the event loop was held 500 ms (as a
// stopped process is), a 300 ms running timeout has not expired yet where a plain setTimeout has, and it still
// expires later; cancelled, it never calls back.
import t from 'tap';
import { runningTimeout } from '../src/trainer/running-timeout.js';

const hold = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    /* the loop held */
  }
};
const nextCheck = () => new Promise<void>(resolve => setImmediate(resolve)); // after the timers due now have run

t.test('a hold of the whole process counts as one tick, not its length', async t => {
  let running = false,
    plain = false;
  let expired!: () => void;
  const done = new Promise<void>(resolve => {
    expired = resolve;
  });
  runningTimeout(300, () => {
    running = true;
    expired();
  });
  setTimeout(() => {
    plain = true;
  }, 300).unref();
  await nextCheck();
  hold(500);
  await nextCheck();
  t.equal(plain, true, 'a plain 300 ms setTimeout fired after the hold');
  t.equal(running, false, 'the running timeout had not: the 500 ms hold counted as one tick');
  const alive = setInterval(() => {}, 1000); // the timeout's own interval is unref'd: keep this process up meanwhile
  await done;
  clearInterval(alive);
  t.equal(running, true, 'it expires once the process has run 300 ms');
});

t.test('cancelled, it never calls back', async t => {
  let called = false;
  const cancel = runningTimeout(50, () => {
    called = true;
  });
  cancel();
  await new Promise(resolve => setTimeout(resolve, 200));
  t.equal(called, false);
});
