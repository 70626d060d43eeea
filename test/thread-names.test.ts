// tandem's threads name themselves (src/engine/thread-name.ts), so that `top -H`, perf and /proc tell them apart and
// the precision bench can split a step's CPU by thread. A real 2-device run on the native engine, read from
// /proc/self/task while it trains: compute and comm threads of both devices and the loader carry their names, the
// main thread (the user's) keeps its own. The names' shape: at most 15 bytes (Linux's limit), the rank kept whole.
// Skipped without the native addon (failed with TANDEM_REQUIRE_NATIVE=1), and off Linux.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { startTraining } from '../src/index.js';
import { nameThisThread, threadName } from '../src/engine/thread-name.js';
import { nativeAddonOrSkip } from './fixtures/native-addon-or-skip.js';

function threadNames(): Map<string, string> {
  const names = new Map<string, string>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      names.set(tid, readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim());
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return names;
}

t.test('names: role and rank, within 15 bytes', async t => {
  t.equal(threadName('compute', 3), 'tdm-compute3');
  t.equal(threadName('comm', 1234), 'tdm-comm1234');
  t.equal(threadName('loader'), 'tdm-loader');
  t.equal(threadName('compute', 9999), 'tdm-compute9999');
  t.ok(threadName('validate', 123456).length <= 15);
});

const linux = process.platform === 'linux';
const addon = linux ? nativeAddonOrSkip() : undefined;
if (!linux) t.comment('skipped: thread names are read from /proc (Linux)');
else if (addon) {
  t.test('the main thread is never renamed', async t => {
    const before = readFileSync(`/proc/self/task/${process.pid}/comm`, 'utf8');
    t.equal(nameThisThread('compute', 0), false);
    t.equal(readFileSync(`/proc/self/task/${process.pid}/comm`, 'utf8'), before);
  });

  t.test("a 2-device run's threads carry their names while it trains", async t => {
    const run = startTraining({
      model: 'alexnet-mini',
      data: 'synthetic-images',
      imageSize: [16, 16, 3],
      datasetSize: 64,
      classes: 10,
      devices: 2,
      batch: 16,
      steps: 8,
      backend: 'native',
      nativeThreads: 1,
    });
    let seen: Map<string, string> | undefined;
    run.timeline$.subscribe(s => {
      if (s.step === 4 && s.thread === 'comm' && !seen) seen = threadNames();
    });
    await run.done;
    t.ok(seen, 'read while training');
    const names = [...seen!.values()];
    for (const name of ['tdm-compute0', 'tdm-compute1', 'tdm-comm0', 'tdm-comm1', 'tdm-loader'])
      t.ok(names.includes(name), `a thread named ${name} (threads: ${names.join(' ')})`);
    t.equal(names.filter(n => n === 'tdm-compute0').length, 1, 'one compute thread per device');
    t.notOk(seen!.get(String(process.pid))?.startsWith('tdm-'), 'the main thread keeps its name');
  });
}
