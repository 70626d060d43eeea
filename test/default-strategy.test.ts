// The strategy of a run that names none: per-layer for one device with two or more CPUs to run on (the update overlaps
// backward on the other core), sequential on one CPU (no core to overlap with: per-layer's wake-ups of the comm
// thread only cost) and for several devices (src/config/check-schedule.ts). The CPUs are the process's affinity: a
// real run under `taskset -c 0` picks sequential, applies its update on the compute thread
// (src/actors/inline-update.ts) and reaches the same parameters as per-layer on two, whose comm thread applies it. The
// runs are `node --input-type=module -e …` programs, which lost every device thread until workerFlags left that flag
// out.
import t from 'tap';
import { execFile, spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { scheduleFields } from '../src/config/check-schedule.js';

t.test('the default by devices and CPUs; a named strategy is kept', async t => {
  t.equal(scheduleFields({}, 1, 2).strategy, 'per-layer', 'one device, two CPUs');
  t.equal(scheduleFields({}, 1, 16).strategy, 'per-layer', 'one device, sixteen CPUs');
  t.equal(scheduleFields({}, 1, 1).strategy, 'sequential', 'one device, one CPU');
  t.equal(scheduleFields({}, 2, 2).strategy, 'sequential', 'two devices');
  t.equal(scheduleFields({ minHosts: 1 }, 1, 2).strategy, 'sequential', 'an elastic run');
  t.equal(scheduleFields({ strategy: 'per-layer' }, 1, 1).strategy, 'per-layer', 'named, on one CPU');
  t.equal(scheduleFields({ strategy: 'two-group' }, 1, 2).strategy, 'two-group', 'named, on two CPUs');
  t.equal(scheduleFields({}, 1).strategy, availableParallelism() > 1 ? 'per-layer' : 'sequential', "this process's");
});

const index = fileURLToPath(new URL('../src/index.js', import.meta.url));
const RUN = `
const { startTraining } = await import(${JSON.stringify(index)});
const run = startTraining({ model: 'mlp', data: 'synthetic-images', imageSize: [6, 6, 1], classes: 4, datasetSize: 64,
  batch: 8, steps: 3, devices: 1, backend: 'cpu', seed: 5 });
const appliedOn = new Set();
run.timeline$.subscribe(s => { if (s.kind === 'apply') appliedOn.add(s.thread); });
const s = await run.done;
console.log(JSON.stringify({ strategy: s.strategy.name, checksum: s.replicaChecksum, appliedOn: [...appliedOn] }));
`;

interface OneCpuRun {
  strategy: string;
  checksum: string;
  /** The threads whose spans show an update. */
  appliedOn: string[];
}

/** A 1-device run in a process on `cpus` (taskset -c): its strategy, replica checksum and where it updated. */
function runOn(cpus: string): Promise<OneCpuRun> {
  return new Promise((resolve, reject) =>
    execFile(
      'taskset',
      ['-c', cpus, process.execPath, '--input-type=module', '-e', RUN],
      { timeout: 120_000 },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`${err.message}\n${stderr}`));
        resolve(JSON.parse(stdout.trim().split('\n').pop()!) as OneCpuRun);
      },
    ),
  );
}

const taskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
t.test(
  "a real run on one CPU picks sequential and updates on the compute thread, with per-layer's bits",
  { skip: !taskset && 'no taskset' },
  async t => {
    const one = await runOn('0');
    t.equal(one.strategy, 'sequential', 'taskset -c 0: sequential');
    t.same(one.appliedOn, ['compute'], 'taskset -c 0: the compute thread applies the update');
    if (availableParallelism() < 2) return;
    const two = await runOn('0,1');
    t.equal(two.strategy, 'per-layer', 'taskset -c 0,1: per-layer');
    t.same(two.appliedOn, ['comm'], 'taskset -c 0,1: the comm thread applies it, beside backward');
    t.equal(one.checksum, two.checksum, 'the same parameters, bit for bit');
  },
);
