// `tandem launch --hosts 3 --max-restarts 1 --min-hosts 2` (real processes, Gloo over loopback): host 2 killed with
// SIGKILL mid-run; the launcher starts it again with the same flags instead of stopping the others, it asks host 0 to
// rejoin and is admitted at the next step boundary (test/elastic-rejoin.test.ts compares the parameters with an
// uninterrupted run); the launch exits 0 and the three hosts' replica checksums agree. The launcher is killed at the
// test's end if still running (its hosts abort when it goes).
import t from 'tap';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { spawnTandem } from './fixtures/cli-process.js';

const STEPS = 160;
const KILL_AFTER = 10;

const SMALL = [
  ...['--model', 'mlp', '--data', 'synthetic-images', '--image-size', '8x8x1', '--classes', '4'],
  ...['--dataset-size', '96', '--backend', 'cpu', '--batch', '12', '--steps', String(STEPS)],
];

if (glooAddonOrSkip()) {
  t.test('tandem launch --max-restarts 1: host 2 killed is started again and rejoins', async t => {
    const launch = spawnTandem(
      ['launch', '--hosts', '3', '--max-restarts', '1', '--min-hosts', '2', '--transport', 'gloo', '--devices', '1']
        .concat(SMALL)
        .concat(['--stall-timeout-ms', '15000']),
      fn => t.teardown(fn),
    );
    await launch.waitFor('stdout', new RegExp(`\\[host 0\\] epoch \\d+ step ${KILL_AFTER} `));
    const pid = Number(/host 2: (\d+)/.exec(launch.stdout() + launch.stderr())?.[1]);
    t.ok(pid > 0, `host 2's pid ${pid}, from the launcher's first line`);
    process.kill(pid, 'SIGKILL');
    const end = await launch.exited;
    const out = launch.stdout() + launch.stderr();
    t.equal(end.code, 0, `the launch exits 0: ${out.slice(-600)}`);
    t.match(
      out,
      /host 2 was killed by SIGKILL.*; restarting it \(restart 1 of --max-restarts 1, pid \d+\)/,
      'the launcher restarts host 2',
    );
    t.match(out, /\[host 2\].*admitted by host 0: going on from step \d+ as host 2 of 3/, 'host 2 rejoins');
    const sums = [...out.matchAll(/replica checksum ([0-9a-f]+)/g)].map(m => m[1]);
    t.equal(sums.length, 3, 'three hosts report their replica checksum');
    t.equal(new Set(sums).size, 1, `the same on every host: ${sums.join(', ')}`);
  });
}
