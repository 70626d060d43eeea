// A host `tandem launch --max-restarts` restarted after the run ended (its host 0 gone: killed at the run's last step,
// the launcher restarts it as host 0 writes its outputs and exits) used to wait the whole setup wait (60 s) for host
// 0's store, then end STALLED asking whether host 0 was started, holding the launcher that long. The launcher marks a
// restarted process (TANDEM_LAUNCH_RESTART): it waits 5 s at most for a store that its run already served, then ends
// ABORTED saying the run ended or host 0 was lost. A real `tandem train` process, its rendezvous a closed port.
import t from 'tap';
import { runTandem } from './fixtures/cli-process.js';
import { freePort } from '../src/world/launch.js';

const SMALL = [
  ...['--model', 'mlp', '--data', 'synthetic-images', '--image-size', '8x8x1', '--classes', '4'],
  ...['--dataset-size', '96', '--backend', 'cpu', '--batch', '12', '--devices', '1', '--steps', '4'],
  ...['--transport', 'gloo', '--min-hosts', '2', '--hosts', '3', '--host-rank', '2'],
];

t.test('a restarted host whose run ended: ABORTED within seconds, saying so', async t => {
  const rendezvous = `127.0.0.1:${await freePort()}`; // nothing listens there: host 0 is gone
  const started = performance.now();
  const run = await runTandem(['train', ...SMALL, '--rendezvous', rendezvous], {
    timeoutMs: 90_000,
    env: { ...process.env, TANDEM_JOB_SECRET: 'ab'.repeat(16), TANDEM_LAUNCH_RESTART: '1' },
  });
  const seconds = (performance.now() - started) / 1000;
  t.equal(run.code, 1, 'exit 1');
  t.match(
    run.stderr,
    /host 2, restarted by tandem launch \(restart 1\), finds host 0's rendezvous store gone: the run ended meanwhile, or host 0 was lost/,
    'the reason',
  );
  t.ok(seconds < 20, `it ends after ${seconds.toFixed(1)} s, not the 60 s setup wait`);
});
