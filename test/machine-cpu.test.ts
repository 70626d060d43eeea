// The hosts bench's machine meter (bench/process-cpu.ts) on this machine's real /proc/stat: CPU burnt in this thread
// shows up in the machine's busy time, and the step meter reads it between the two steps a child prints.
import t from 'tap';
import { EventEmitter } from 'node:events';
import type { ChildProcess } from 'node:child_process';
import { machineCpuMs, meterStepMachine } from '../bench/process-cpu.js';

const linux = process.platform === 'linux';

function burn(ms: number): void {
  const until = performance.now() + ms;
  let x = 0;
  while (performance.now() < until) x += Math.sqrt(x + 1);
  if (x < 0) throw new Error('unreachable');
}

t.test("CPU burnt here is in the machine's busy time", { skip: !linux && 'Linux only' }, async t => {
  const before = machineCpuMs()!,
    own = process.cpuUsage();
  burn(400);
  const after = machineCpuMs()!,
    ownMs = (process.cpuUsage(own).user + process.cpuUsage(own).system) / 1000;
  t.ok(after.kernelMs <= after.busyMs, "the kernel's time is part of busy");
  t.ok(
    after.busyMs - before.busyMs >= 0.5 * ownMs,
    `the machine was busy ${(after.busyMs - before.busyMs).toFixed(0)} ms while this thread used ` +
      `${ownMs.toFixed(0)} ms`,
  );
  t.ok(after.idleMs >= before.idleMs, 'idle only goes forward');
});

t.test(
  'the step meter reads the machine when step `from` and step `to` are printed',
  { skip: !linux && 'Linux only' },
  async t => {
    const stdout = new EventEmitter();
    const child = { stdout, pid: process.pid } as unknown as ChildProcess;
    const meter = meterStepMachine(child, 2, 4);
    stdout.emit('data', '{"event":"step","step":1,"loss":1}\n{"event":"step","step":2,');
    t.equal(meter(), undefined, "nothing before step 2's line is whole");
    stdout.emit('data', '"loss":1}\n');
    burn(200);
    stdout.emit('data', '{"event":"step","step":3,"loss":1}\n{"event":"step","step":4,"loss":1}\n');
    const per = meter();
    t.ok(
      per !== undefined && per.busyMs >= (0.5 * 200) / 2,
      `busy per step over steps 3-4: ${per?.busyMs.toFixed(0)} ms (200 ms burnt over 2 steps)`,
    );
  },
);
