// The profiler's clocks: thread-cpu counts the calling thread's own work, at sub-millisecond steps, and
// not another thread's (the reason it is robust to load: time spent waiting for a core is not counted
// either); process-cpu counts every thread of the process. Synchronised with Atomics, no sleeps.
import t from 'tap';
import { Worker } from 'node:worker_threads';
import { clockOfKind, layerClock } from '../src/profiling/layer-clock.js';

const linux = process.platform === 'linux';

/** A thread that burns `ms` of its own CPU time, then sets the flag and notifies. */
const BUSY_WORKER = `
const { workerData } = require('node:worker_threads');
const fs = require('node:fs');
const cpuMs = () => {
  process.cpuUsage();
  return Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1e6;
};
const flag = new Int32Array(workerData.flag);
const start = cpuMs();
let x = 0;
while (cpuMs() - start < workerData.ms) for (let i = 0; i < 1e5; i++) x += Math.sqrt(i);
Atomics.store(flag, 0, 1);
Atomics.notify(flag, 0);
`;

t.test(
  "thread-cpu: this thread's work at sub-millisecond steps, within the wall time it took",
  { skip: !linux && 'Linux only' },
  async t => {
    const clock = layerClock('calling-thread');
    t.teardown(() => clock.close());
    t.equal(clock.kind, 'thread-cpu', clock.reason);
    const steps: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = clock.nowMs();
      let t1 = t0;
      while (t1 === t0) t1 = clock.nowMs();
      steps.push(t1 - t0);
    }
    t.ok(
      Math.min(...steps) < 0.5,
      `smallest step ${Math.min(...steps).toFixed(4)} ms < 0.5 ms (a scheduler tick is 1-10 ms)`,
    );
    const w0 = performance.now(),
      c0 = clock.nowMs();
    let x = 0;
    for (let i = 0; i < 2e7; i++) x += Math.sqrt(i);
    const cpu = clock.nowMs() - c0,
      wall = performance.now() - w0;
    t.ok(
      cpu > 0 && cpu <= wall + 0.5,
      `a busy loop: ${cpu.toFixed(1)} ms CPU within ${wall.toFixed(1)} ms wall (${x > 0})`,
    );
  },
);

t.test(
  "thread-cpu does not count another thread's work; process-cpu does",
  { skip: !linux && 'Linux only' },
  async t => {
    const thread = layerClock('calling-thread'),
      processCpu = clockOfKind('process-cpu');
    t.teardown(() => thread.close());
    const flag = new SharedArrayBuffer(4);
    const worker = new Worker(BUSY_WORKER, { eval: true, workerData: { flag, ms: 150 } });
    const online = new Promise(resolve => worker.once('online', resolve));
    await online;
    const t0 = thread.nowMs(),
      p0 = processCpu.nowMs();
    Atomics.wait(new Int32Array(flag), 0, 0); // blocked until the worker has burnt its 150 ms
    const mine = thread.nowMs() - t0,
      all = processCpu.nowMs() - p0;
    await worker.terminate();
    t.ok(mine < 20, `this thread, blocked: ${mine.toFixed(2)} ms CPU`);
    t.ok(all >= 140, `the process: ${all.toFixed(1)} ms CPU (the worker's 150 ms)`);
  },
);
