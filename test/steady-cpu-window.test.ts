// The scaling bench's cores-busy window, on hand-made CPU readings: it opens when the last training passes its warm-up
// step and closes when the first reaches its end step, and divides the CPU time by the wall time between the two;
// one real reading of this process is finite and non-negative.
import t from 'tap';
import { readProcessCpu, SteadyCpuWindow, type CpuReading } from '../bench/steady-cpu-window.js';

/** A clock that gives the readings in order. */
function readings(...list: CpuReading[]): () => CpuReading {
  let i = 0;
  return () => list[i++];
}

t.test('two trainings: from the later warm-up to the earlier end', async t => {
  const window = new SteadyCpuWindow(2, 3, 8, readings({ wallMs: 100, cpuMs: 1000 }, { wallMs: 300, cpuMs: 1380 }));
  window.onStep(0, 3);
  t.equal(window.coresBusy(), undefined, 'not open while training 1 is in its warm-up');
  window.onStep(1, 2);
  window.onStep(1, 3); // opens: reading 1
  window.onStep(0, 8); // closes: reading 2
  window.onStep(1, 8); // already closed: no reading
  t.equal(window.coresBusy(), 380 / 200, '380 ms of CPU in 200 ms of wall time');
});

t.test('one training; a window that never closes says nothing', async t => {
  const one = new SteadyCpuWindow(1, 2, 4, readings({ wallMs: 0, cpuMs: 0 }, { wallMs: 50, cpuMs: 45 }));
  for (let s = 1; s <= 4; s++) one.onStep(0, s);
  t.equal(one.coresBusy(), 0.9, '45 ms of CPU in 50 ms');
  const open = new SteadyCpuWindow(1, 2, 9, readings({ wallMs: 0, cpuMs: 0 }));
  for (let s = 1; s <= 4; s++) open.onStep(0, s);
  t.equal(open.coresBusy(), undefined, 'no end reading');
});

t.test('a real reading', async t => {
  const a = readProcessCpu();
  let x = 0;
  for (let i = 0; i < 1e6; i++) x += Math.sqrt(i);
  const b = readProcessCpu();
  t.ok(x > 0 && b.cpuMs >= a.cpuMs && b.wallMs >= a.wallMs, 'CPU and wall time only go forward');
});
