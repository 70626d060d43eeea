// Hosts in lockstep wait for the slowest (src/profiling/lockstep.ts), computed two ways: e(n), the expected maximum of
// n
// standard normal draws, by the module's integration against its closed forms (e(2) = 1/√π, e(3) = 3/(2√π)) and
// against a seeded Monte Carlo of 200,000 draws for n = 2..8; the spread against a hand computation. In the schedule
// model (schedule-model.ts): two hosts whose calibrated steps spread by σ add e(2)·σ to a compute-bound schedule's
// step, in the simulated period and in the CPU ceiling alike; one host adds nothing; a link-bound step grows by at
// most that.
import t from 'tap';
import { expectedMaxOfNormals, lockstepMs, spreadOf } from '../src/profiling/lockstep.js';
import { predictSchedule, type Machine, type ScheduleSpec } from '../src/profiling/schedule-model.js';
import { cpuShareOfHost } from '../src/profiling/cpu-ceiling.js';
import { layoutParameters } from '../src/model/parameter-layout.js';
import type { LayerCost, ModelProfile } from '../src/profiling/layer-profile.js';
import { normals } from './fixtures/normal-draws.js';

t.test('e(n): the integration against closed forms and a Monte Carlo', async t => {
  t.equal(expectedMaxOfNormals(1), 0, 'one host waits for nobody');
  t.ok(
    Math.abs(expectedMaxOfNormals(2) - 1 / Math.sqrt(Math.PI)) < 1e-6,
    `e(2) = ${expectedMaxOfNormals(2).toFixed(6)} = 1/√π`,
  );
  t.ok(
    Math.abs(expectedMaxOfNormals(3) - 3 / (2 * Math.sqrt(Math.PI))) < 1e-6,
    `e(3) = ${expectedMaxOfNormals(3).toFixed(6)} = 3/(2√π)`,
  );
  const draw = normals(7);
  const DRAWS = 200_000;
  for (let n = 2; n <= 8; n++) {
    let sum = 0;
    for (let i = 0; i < DRAWS; i++) {
      let max = -Infinity;
      for (let k = 0; k < n; k++) max = Math.max(max, draw());
      sum += max;
    }
    const sampled = sum / DRAWS;
    t.ok(
      Math.abs(expectedMaxOfNormals(n) - sampled) < 0.01,
      `e(${n}) = ${expectedMaxOfNormals(n).toFixed(4)}, sampled ${sampled.toFixed(4)}`,
    );
  }
  t.ok(expectedMaxOfNormals(16) > expectedMaxOfNormals(8), 'more hosts wait longer');
  t.throws(() => expectedMaxOfNormals(0), RangeError);
  t.throws(() => expectedMaxOfNormals(2.5), RangeError);
});

t.test('lockstepMs and spreadOf', async t => {
  t.equal(lockstepMs(4, 1), 0, 'one host: 0');
  t.equal(lockstepMs(0, 4), 0, 'no spread: 0');
  t.ok(
    Math.abs(lockstepMs(4, 2) - 4 / Math.sqrt(Math.PI)) < 1e-5,
    `σ 4 ms, 2 hosts: ${lockstepMs(4, 2).toFixed(3)} ms`,
  );
  t.equal(spreadOf([5]), undefined, 'one period: no spread');
  // mean 5; squared deviations 9 + 1 + 1 + 9 = 20; over n-1 = 3
  t.ok(
    Math.abs(spreadOf([2, 4, 6, 8])! - Math.sqrt(20 / 3)) < 1e-12,
    `spread of 2 4 6 8 = √(20/3) = ${spreadOf([2, 4, 6, 8])!.toFixed(4)}`,
  );
});

/** Two layers: `computeMs` of compute, a gradient of `floats` (one group). */
function profileOf(computeMs: number, floats: number, stepSpreadMs: number, cpuMsPerStep: number): ModelProfile {
  const layer: LayerCost = {
    name: 'dense',
    className: 'Dense',
    forwardMs: computeMs / 3,
    backwardMs: (2 * computeMs) / 3,
    parameters: floats,
    bytes: 4 * floats,
    outputSize: 1,
  };
  return {
    model: 'hand',
    backend: 'none',
    batch: 32,
    layers: [layer],
    stepForwardMs: computeMs / 3,
    stepBackwardMs: (2 * computeMs) / 3,
    overheadMs: 1,
    exchangeBytesPerMs: 1e6,
    updateBytesPerMs: 1e7,
    measuredSteps: 0,
    warmupSteps: 0,
    reps: 0,
    clock: { kind: 'thread-cpu', reason: 'by hand' },
    weights: [{ name: 'dense/kernel', shape: [floats] }],
    calibration: { devices: 1, computeScale: 1, steadyStepMs: computeMs, cpuMsPerStep, stepSpreadMs },
  };
}

t.test('the schedule model adds e(hosts)·σ where compute binds, at most that where the link does', async t => {
  const machineOf = (hosts: number, gbits: number, cores: number): Machine => ({
    localDevices: 1,
    hosts,
    cpu: cpuShareOfHost(1, cores),
    link: { alphaMs: 0.1, msPerWireByte: 8 / (gbits * 1e6), ranks: hosts, source: 'measured' },
    hookCosts: { encodeMsPerFloat: 2e-6, decodeMsPerFloat: 1e-6, macMs: 2e-7, passMsPerFloat: 5e-7 },
    powerSgd: { rank: 8, minCompressionRate: 2 },
  });
  const floats = 100_000;
  const spec: ScheduleSpec = {
    strategy: 'sequential',
    groups: [{ name: 'all', start: 0, end: layoutParameters([{ name: 'dense/kernel', shape: [floats] }]).total }],
    forwardWait: 'group',
    exchange: { order: 'ready' },
    hook: 'none',
  };
  const sigma = 6;
  const wait = expectedMaxOfNormals(2) * sigma;
  // Compute-bound (a fast link), the period binding (16 cores):
  const fast = profileOf(30, floats, sigma, 10);
  const one = predictSchedule(fast, spec, machineOf(1, 100, 16)),
    two = predictSchedule(fast, spec, machineOf(2, 100, 16));
  t.equal(one.lockstepMs, 0, 'one host: no lockstep wait');
  t.ok(Math.abs(two.lockstepMs - wait) < 1e-9, `two hosts: ${two.lockstepMs.toFixed(3)} ms = e(2)·${sigma}`);
  const oneAlike = predictSchedule(fast, spec, { ...machineOf(2, 100, 16), hosts: 1 });
  t.ok(
    Math.abs(two.ms - oneAlike.ms - wait) < 1e-6,
    `period-bound: ${two.ms.toFixed(2)} = ${oneAlike.ms.toFixed(2)} + ${wait.toFixed(2)} ms`,
  );
  // CPU-bound (1 core, 60 ms of CPU a step): the ceiling grows by the wait too (the cores idle through it).
  const busy = profileOf(30, floats, sigma, 60);
  const bound = predictSchedule(busy, spec, machineOf(2, 100, 1));
  t.ok(
    bound.cpuBound && Math.abs(bound.ms - (60 + 0.1 * 2 + wait)) < 0.5,
    `CPU-bound: ${bound.ms.toFixed(2)} ≈ 60 ms CPU + messages + ${wait.toFixed(2)} ms`,
  );
  // Link-bound (10 Mbit/s: the exchange takes ~320 ms, compute 30):
  const slow = predictSchedule(fast, spec, machineOf(2, 0.01, 16));
  const slowOne = predictSchedule(fast, spec, { ...machineOf(2, 0.01, 16), hosts: 1 });
  t.ok(
    slow.ms - slowOne.ms <= wait + 1e-6 && slow.ms > 100,
    `link-bound (${slow.ms.toFixed(1)} ms): grows by at most the wait (${(slow.ms - slowOne.ms).toFixed(2)} ms)`,
  );
});
