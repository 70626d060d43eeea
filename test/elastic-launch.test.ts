// `tandem launch` of an elastic run (real processes, Gloo over loopback):
// - `--min-hosts` that the run cannot keep (more than --hosts; the default shm transport on one machine) is refused
//   once, before any host starts (every host used to start and fail with the same message);
// - `--hosts 4 --min-hosts 2` without `--max-restarts`: hosts 2 and 3 killed at once, hosts 0 and 1 go on to the last
//   step (the launcher used to stop them, ending the run --min-hosts was given to keep); the launch exits non-zero
//   naming both.
// The launcher is killed at the test's end if still running (its hosts abort when it goes).
import t from 'tap';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { runTandem, spawnTandem } from './fixtures/cli-process.js';

const STEPS = 60;
const KILL_AFTER = 8;

const SMALL = [
  ...['--model', 'mlp', '--data', 'synthetic-images', '--image-size', '8x8x1', '--classes', '4'],
  ...['--dataset-size', '96', '--backend', 'cpu', '--batch', '12', '--devices', '1'],
];

t.test('an elastic run the launch cannot keep: refused before any host starts', async t => {
  for (const [extra, message] of [
    [['--min-hosts', '4', '--transport', 'gloo'], /config\.minHosts\): 4 is more than the 3 hosts of the run/],
    [['--min-hosts', '2'], /config\.minHosts\): transport 'shm' cannot be re-formed.*give --transport gloo/],
  ] as const) {
    const run = await runTandem(['launch', '--hosts', '3', ...SMALL, '--steps', '2', ...extra]);
    t.equal(run.code, 1, `${extra.join(' ')}: exit 1`);
    t.match(run.stderr, message, `${extra.join(' ')}: the reason`);
    t.notMatch(run.stdout + run.stderr, /\[host \d\]|tandem launch: 3 hosts/, `${extra.join(' ')}: no host started`);
  }
});

if (glooAddonOrSkip()) {
  t.test(
    'tandem launch --hosts 4 --min-hosts 2: hosts 2 and 3 killed, hosts 0 and 1 go on to the last step',
    async t => {
      const launch = spawnTandem(
        ['launch', '--hosts', '4', '--min-hosts', '2', '--transport', 'gloo', ...SMALL].concat([
          '--steps',
          String(STEPS),
          '--stall-timeout-ms',
          '4000',
        ]),
        fn => t.teardown(fn),
      );
      await launch.waitFor('stdout', new RegExp(`\\[host 0\\] epoch \\d+ step ${KILL_AFTER} `));
      const pids = [2, 3].map(h => Number(new RegExp(`host ${h}: (\\d+)`).exec(launch.stderr())?.[1]));
      t.ok(
        pids.every(p => p > 0),
        `hosts 2 and 3's pids ${pids.join(', ')}, from the launcher's first line`,
      );
      pids.forEach(p => process.kill(p, 'SIGKILL'));
      const end = await launch.exited;
      const out = launch.stdout() + launch.stderr();
      t.equal(end.code, 128 + 9, `the launch exits 137, host 2's end: ${out.slice(-600)}`);
      for (const h of [2, 3])
        t.match(
          out,
          new RegExp(`host ${h} was killed by SIGKILL.*; the other hosts go on without it \\(--min-hosts\\)`),
        );
      t.notMatch(out, /stopping the other hosts|SIGTERM/, 'the launcher stops no host');
      t.match(out, /\[host 0\].*going on from step \d+ with 2 host/, 'hosts 0 and 1 regroup');
      t.match(out, new RegExp(`\\[host 0\\] epoch \\d+ step ${STEPS} `), 'host 0 reaches the last step');
      t.match(
        out,
        /failed: host (2|3) was killed by SIGKILL.*; host (2|3) was killed by SIGKILL.*; the other hosts went on without them and ended well/,
        'the launcher names both lost hosts',
      );
      const sums = [...out.matchAll(/replica checksum ([0-9a-f]+)/g)].map(m => m[1]);
      t.equal(sums.length, 2, 'hosts 0 and 1 report their replica checksum');
      t.equal(new Set(sums).size, 1, `the same on both: ${sums.join(', ')}`);
    },
  );
}
