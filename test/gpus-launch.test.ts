// One process per GPU, real processes of one machine joined by its transport (shm; gloo on 127.0.0.1 without the shm
// addon): `tandem launch --gpus 2` trains to
// the bits of one process with `--devices 2`, and so do two launchers `--hosts 2 --gpus 1 --host-rank R --rendezvous`
// (one per "machine"); each GPU process runs with the environment gpu-pinning computes for it (read back from
// /proc/PID/environ while it runs); a GPU process killed with SIGKILL ends the launch non-zero naming it ("GPU process
// 1
// (pid P)"), and the survivor's error names it the same way ("lost peer rank 1 (GPU process 1, …)"); a checkpoint of
// `--gpus 2` resumes to the bits of an uninterrupted run. `--backend webgpu --gpus 2`
// (slow on software Vulkan) is test/gpus-launch.gpu.ts, in `npm run test:webgpu`. Every process is torn down.
import t from 'tap';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { beforeEnd, exitedZero, firstLine, killAllTandems, summaryOf, tandem } from './fixtures/tandem-lines.js';
import { freePort } from '../src/world/launch.js';
import { findGpus, hasMesaDeviceSelect } from '../src/world/gpu-inventory.js';
import { PINNING_VARIABLES, planGpus } from '../src/world/gpu-pinning.js';
import { checkpointPath } from '../src/checkpoint/checkpoint-file.js';
import { loadShmAddon } from '../src/collectives/shm/shm-addon.js';
import { smallRunArgs } from './fixtures/small-run.js';

// --verbose: every GPU process prints its steps
const TRAIN = [...smallRunArgs({ seed: 3, strategy: 'sequential' }), '--json', '--verbose'];

t.teardown(killAllTandems);

const dir = mkdtempSync(path.join(tmpdir(), 'tandem-gpus-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const bits = (run: string) => readFileSync(path.join(dir, run, 'weights.bin'));

if (glooAddonOrSkip()) {
  t.test(
    'launch --gpus 2, and two launchers --hosts 2 --gpus 1, equal one process with --devices 2, bit for bit',
    async t => {
      const rendezvous = `127.0.0.1:${await freePort()}`;
      // Its checkpoint of step 3 is the one the next test resumes (one launch less: the suite's time).
      const gpus = tandem([
        'launch',
        '--gpus',
        '2',
        ...TRAIN,
        '--steps',
        '6',
        '--checkpoint-every',
        '3',
        '--out',
        path.join(dir, 'gpus'),
      ]);
      const machines = [0, 1].map(h =>
        tandem([
          'launch',
          '--hosts',
          '2',
          '--host-rank',
          String(h),
          '--rendezvous',
          rendezvous,
          '--gpus',
          '1',
          ...TRAIN,
          '--steps',
          '6',
          '--out',
          path.join(dir, 'machines'),
        ]),
      );
      const one = tandem(['train', '--devices', '2', ...TRAIN, '--steps', '6', '--out', path.join(dir, 'one')]);
      const [g, m0, m1, o] = await Promise.all([gpus.ended, ...machines.map(m => m.ended), one.ended]);
      exitedZero(t, gpus, g.code, 'launch --gpus 2');
      exitedZero(t, machines[0], m0.code, 'launch --hosts 2 --host-rank 0 --gpus 1');
      exitedZero(t, machines[1], m1.code, 'launch --hosts 2 --host-rank 1 --gpus 1');
      exitedZero(t, one, o.code, 'one process --devices 2');
      const single = summaryOf(one.lines);
      const perGpu = [0, 1].map(k => summaryOf(gpus.lines, `[gpu ${k}] `));
      t.equal(perGpu[0].config.devices, 2, 'the world is 2 GPU processes × 1 device');
      t.equal(
        perGpu[0].config.transport,
        loadShmAddon().loaded ? 'shm' : 'gloo',
        'joined by the transport of processes of one machine',
      );
      perGpu.forEach((s, k) =>
        t.equal(s.replicaChecksum, single.replicaChecksum, `GPU process ${k}'s replica = the one-process replica`),
      );
      t.equal(
        summaryOf(machines[1].lines, '[host 1 gpu 0] ').replicaChecksum,
        single.replicaChecksum,
        "host 1's GPU process: the same replica",
      );
      t.ok(bits('gpus').equals(bits('one')), 'launch --gpus 2: weights.bin bit-identical');
      t.ok(bits('machines').equals(bits('one')), 'two launchers --gpus 1: weights.bin bit-identical');
      t.match(
        gpus.stderr.join('\n'),
        /GPU process 1 \(pid \d+\) \[gpu 1\]: /,
        'the launcher names each GPU process, its pid and its GPU',
      );
    },
  );

  t.test(
    'a checkpoint of launch --gpus 2 (the one above, of step 3) resumes to the bits of the uninterrupted run',
    async t => {
      const ckpt = checkpointPath(path.join(dir, 'gpus'), 3);
      t.ok(existsSync(ckpt), `GPU process 0 wrote ${ckpt}`);
      const resumed = tandem([
        'launch',
        '--gpus',
        '2',
        ...TRAIN,
        '--steps',
        '6',
        '--resume',
        ckpt,
        '--out',
        path.join(dir, 'resumed'),
      ]);
      exitedZero(t, resumed, (await resumed.ended).code, 'the resumed launch');
      t.ok(
        resumed.lines.some(l => l.startsWith('[gpu 1] {"event":"started"') && l.includes('"firstStep":4')),
        'GPU process 1 resumed at step 4',
      );
      t.ok(
        bits('resumed').equals(bits('one')),
        'weights.bin after 3 + 3 steps = the uninterrupted 6 steps (one process --devices 2)',
      );
    },
  );

  t.test(
    'each GPU process runs with its pinning; GPU process 1 killed with SIGKILL ends the launch non-zero naming it',
    async t => {
      const stepping = firstLine(/^\[gpu 1\] \{"event":"step","step":3\b/);
      const launch = tandem(['launch', '--gpus', '2', ...TRAIN, '--steps', '100000'], stepping.onLine);
      await beforeEnd(stepping.seen, launch, 'launch');
      const pids = [0, 1].map(k =>
        Number(new RegExp(`GPU process ${k} \\(pid (\\d+)\\)`).exec(launch.stderr.join('\n'))?.[1]),
      );
      const expected = planGpus(findGpus(), 2, {
        cpus: availableParallelism(),
        deviceSelectLayer: hasMesaDeviceSelect(),
      }).pins;
      pids.forEach((pid, k) =>
        t.same(pinningOf(pid), expected[k].env, `GPU process ${k} (pid ${pid}): the environment gpu-pinning computes`),
      );
      process.kill(pids[1], 'SIGKILL');
      const end = await launch.ended;
      t.not(end.code, 0, 'launch exits non-zero');
      t.match(
        launch.stderr.join('\n'),
        new RegExp(
          `failed: GPU process 1 \\(pid ${pids[1]}\\) was killed by SIGKILL \\(not by tandem: the kernel's ` +
            `out-of-memory killer, or a user; ` +
            (`check \`dmesg\` .*"Out of memory: Killed process ${pids[1]}"; a smaller --batch or fewer --devices per ` +
              `process uses less memory\\)`),
        ),
      );
      // The survivor's own error names its lost peer as the launcher does (describeProcess), not as a host.
      const survivor = launch.lines
        .concat(launch.stderr)
        .filter(l => l.startsWith('[gpu 0] ') && /lost peer/.test(l))
        .join('\n');
      t.match(
        survivor,
        /\(GPU process 0\): lost peer rank 1 \(GPU process 1\b/,
        'GPU process 0 names its lost peer "GPU process 1"',
      ) ||
        t.comment(
          launch.lines
            .concat(launch.stderr)
            .filter(l => l.startsWith('[gpu 0] ') && !l.includes('"event":"step"'))
            .slice(-6)
            .join('\n'),
        );
      t.notMatch(survivor, /\bhost 1\b/, 'and never "host 1"');
    },
  );
}

/** The pinning variables in process `pid`'s environment (as it started). */
function pinningOf(pid: number): Record<string, string> {
  const vars = new Set<string>(PINNING_VARIABLES);
  const out: Record<string, string> = {};
  for (const entry of readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0 && vars.has(entry.slice(0, eq))) out[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return out;
}
