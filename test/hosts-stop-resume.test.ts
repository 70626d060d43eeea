// Several hosts, stopped and resumed, real processes and sockets on 127.0.0.1: a SIGINT to `tandem launch --hosts 2`
// mid-run stops both hosts after the same step (agreed over host 0's store), the launcher exits 130 and host 0 wrote
// that
// step's checkpoint; `launch --hosts 2 --resume` from it gives the bits of an uninterrupted run (weights.bin
// byte-equal; the
// run is one process with --devices 2, which hosts.test.ts shows equal to 2 hosts × 1). A SIGINT to one host alone (no
// launcher) stops the other after the same step too.
// Synchronised on the processes' output lines; every process is torn down.
import t from 'tap';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { killAllTandems, tandemMerged, type MergedProcess } from './fixtures/tandem-lines.js';
import { checkpointPath } from '../src/checkpoint/checkpoint-file.js';
import { freePort } from '../src/world/launch.js';
import { smallRunArgs } from './fixtures/small-run.js';

// --verbose: host 1 prints its steps too
const TRAIN = [...smallRunArgs({ seed: 3, strategy: 'sequential' }), '--optimizer', 'adam', '--json', '--verbose'];
const HOSTS = ['--hosts', '2', '--devices', '1'];
/** Far more steps than the stopped run gets to (it is stopped at its third step). */
const MANY_STEPS = '2000';

type Proc = MergedProcess;
const tandem = tandemMerged;
t.teardown(killAllTandems);

function launch(args: string[], onLine?: (line: string) => void): Proc {
  return tandem(['launch', ...args], onLine);
}

/** The step each host's `stopped` event names. */
function stoppedSteps(lines: string[]): number[] {
  return [0, 1].map(h => {
    const line = lines.find(l => l.startsWith(`[host ${h}] {"event":"stopped"`));
    return line ? (JSON.parse(line.slice(`[host ${h}] `.length)) as { step: number }).step : NaN;
  });
}

if (glooAddonOrSkip()) {
  t.test(
    'SIGINT to launch --hosts 2: both hosts stop after the same step, host 0 checkpoints it; the resume equals an ' +
      'uninterrupted run',
    async t => {
      const dir = mkdtempSync(path.join(tmpdir(), 'tandem-hosts-stop-'));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const stopped = launch([...HOSTS, ...TRAIN, '--steps', MANY_STEPS, '--out', path.join(dir, 'stopped')], line => {
        if (line.startsWith('[host 1] {"event":"step","step":3,')) stopped.child.kill('SIGINT');
      });
      t.equal(await stopped.ended, 130, 'the stopped launch exits 130') || t.comment(stopped.lines.join('\n'));
      const [at0, at1] = stoppedSteps(stopped.lines);
      t.ok(at0 >= 3, `host 0 stopped after step ${at0}`);
      t.equal(at1, at0, 'both hosts stopped after the same step');
      const ckpt = checkpointPath(path.join(dir, 'stopped'), at0);
      t.ok(existsSync(ckpt), `host 0 wrote ${ckpt}`);

      const steps = String(at0 + 3);
      const resumed = launch([
        ...HOSTS,
        ...TRAIN,
        '--steps',
        steps,
        '--resume',
        ckpt,
        '--out',
        path.join(dir, 'resumed'),
      ]);
      // = 2 hosts × 1 (hosts.test.ts)
      const whole = tandem(['train', '--devices', '2', ...TRAIN, '--steps', steps, '--out', path.join(dir, 'whole')]);
      const [r, w] = await Promise.all([resumed.ended, whole.ended]);
      t.equal(r, 0, 'the resumed launch exits 0') || t.comment(resumed.lines.join('\n'));
      t.equal(w, 0, 'the uninterrupted run (one process, --devices 2) exits 0') || t.comment(whole.lines.join('\n'));
      t.ok(
        resumed.lines.some(l => l.startsWith(`[host 1] {"event":"started"`) && l.includes(`"firstStep":${at0 + 1}`)),
        `host 1 resumed at step ${at0 + 1}`,
      );
      const bits = (run: string) => readFileSync(path.join(dir, run, 'weights.bin'));
      t.ok(
        bits('resumed').equals(bits('whole')),
        `weights.bin of the resumed run (${at0} + 3 steps) equals the uninterrupted run's, byte for byte`,
      );
    },
  );

  t.test(
    'SIGINT to host 1 alone (hosts run without a launcher): host 0 stops after the same step and checkpoints it',
    async t => {
      const dir = mkdtempSync(path.join(tmpdir(), 'tandem-hosts-stop-one-'));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const rendezvous = `127.0.0.1:${await freePort()}`;
      const host = (rank: number, onLine?: (line: string) => void) =>
        tandem(
          [
            'train',
            ...HOSTS,
            ...TRAIN,
            '--host-rank',
            String(rank),
            '--rendezvous',
            rendezvous,
            '--steps',
            MANY_STEPS,
            '--out',
            path.join(dir, 'out'),
          ],
          onLine,
        );
      const host0 = host(0);
      const host1 = host(1, line => {
        if (line.startsWith('{"event":"step","step":3,')) host1.child.kill('SIGINT');
      });
      const [code0, code1] = await Promise.all([host0.ended, host1.ended]);
      t.equal(code1, 130, 'host 1 (signalled) exits 130') || t.comment(host1.lines.join('\n'));
      t.equal(code0, 130, 'host 0 (not signalled) exits 130 too') || t.comment(host0.lines.join('\n'));
      const stoppedAt = (p: Proc) =>
        (JSON.parse(p.lines.find(l => l.startsWith('{"event":"stopped"')) ?? '{}') as { step?: number }).step;
      const at = stoppedAt(host0);
      t.ok(at !== undefined && at >= 3, `host 0 stopped after step ${at}`);
      t.equal(stoppedAt(host1), at, 'both hosts stopped after the same step');
      t.ok(
        at !== undefined && existsSync(checkpointPath(path.join(dir, 'out'), at)),
        'host 0 wrote the checkpoint of that step',
      );
    },
  );
}
