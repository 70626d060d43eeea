// Checkpoints and resume of local-head and partial-fc across hosts, real processes and sockets on 127.0.0.1. Every
// device's head lives on its host; at a checkpoint host 0 collects every host's heads over the rendezvous store, so
// (partial-fc) `launch --hosts 2 --devices 1 --checkpoint-every 2` writes the very file (byte for byte) one process
// with
// `--devices 2` writes; `launch --hosts 2 --resume` from it (host 0 reads it and sends it, heads and all, to host 1)
// gives the extractor and full classifier of the uninterrupted one-process run, bit for bit. (local-head) A SIGINT to
// the launcher
// stops both hosts after the same step with a stop checkpoint holding host 1's head too, and resuming it is exact.
// Adam, so the heads' optimizer state matters. Synchronised on the processes' output lines; every process is torn down.
import t from 'tap';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { killAllTandems, tandemMerged, type MergedProcess } from './fixtures/tandem-lines.js';
import { checkpointPath } from '../src/checkpoint/checkpoint-file.js';

/** 5 classes over 2 devices: heads of 3 and 2 labels. */
const TRAIN = [
  '--model',
  'mlp',
  '--data',
  'synthetic-images',
  '--image-size',
  '8x8x1',
  '--classes',
  '5',
  '--dataset-size',
  '90',
  '--batch',
  '8',
  '--seed',
  '3',
  '--embedding',
  '8',
  '--export-classifier',
  '--optimizer',
  'adam',
  '--json',
  '--verbose',
]; // --verbose: host 1 prints its events too
const HOSTS = ['--hosts', '2', '--devices', '1'];

type Assert = Pick<typeof t, 'ok' | 'equal' | 'comment'>;
type Proc = MergedProcess;
const tandem = tandemMerged;
t.teardown(killAllTandems);

/** Both runs exit 0 (their output shown otherwise). */
async function bothSucceed(t: Assert, runs: Record<string, Proc>): Promise<void> {
  const codes = await Promise.all(Object.values(runs).map(r => r.ended));
  Object.keys(runs).forEach(
    (name, i) => t.equal(codes[i], 0, `${name} exits 0`) || t.comment(runs[name].lines.join('\n')),
  );
}

/** The extractor and the full classifier of two runs' outputs are byte-equal. */
function sameModels(t: Assert, a: string, b: string, what: string): void {
  for (const file of ['weights.bin', path.join('classifier', 'weights.bin')]) {
    t.ok(readFileSync(path.join(a, file)).equals(readFileSync(path.join(b, file))), `${what}: ${file} byte-equal`);
  }
}

if (glooAddonOrSkip()) {
  // partial-fc here, local-head below (stopped): both methods' heads take the same way to host 0
  // (HostChannel.collectHeads).
  for (const method of ['partial-fc']) {
    t.test(
      `${method}: host 0's checkpoint across hosts = one process's, byte for byte; resuming it = the uninterrupted run`,
      async t => {
        const dir = mkdtempSync(path.join(tmpdir(), `tandem-hosts-ckpt-${method}-`));
        t.teardown(() => rmSync(dir, { recursive: true, force: true }));
        const out = (run: string) => path.join(dir, run);
        const args = [...TRAIN, '--method', method, '--checkpoint-every', '2'];
        await bothSucceed(t, {
          'launch (3 steps)': tandem(['launch', ...HOSTS, ...args, '--steps', '3', '--out', out('hosts')]),
          'one process (5 steps)': tandem(['train', '--devices', '2', ...args, '--steps', '5', '--out', out('one')]),
        });
        const ckpt = checkpointPath(out('hosts'), 2);
        t.ok(
          readFileSync(ckpt).equals(readFileSync(checkpointPath(out('one'), 2))),
          "the checkpoint of step 2 (both heads) is byte-equal to one process's",
        );
        const resumed = tandem([
          'launch',
          ...HOSTS,
          ...TRAIN,
          '--method',
          method,
          '--steps',
          '5',
          '--resume',
          ckpt,
          '--out',
          out('resumed'),
        ]);
        await bothSucceed(t, { 'resumed launch': resumed });
        t.ok(
          resumed.lines.some(l => l.startsWith('[host 1] {"event":"started"') && l.includes('"firstStep":3')),
          'host 1 resumed at step 3',
        );
        sameModels(t, out('resumed'), out('one'), 'resumed across hosts (2 + 3 steps) vs one process (5 steps)');
      },
    );
  }

  t.test(
    'local-head: SIGINT to launch --hosts 2 stops both hosts after the same step, host 0 writes its checkpoint with ' +
      'both heads; the resume is exact',
    async t => {
      const dir = mkdtempSync(path.join(tmpdir(), 'tandem-hosts-stop-local-head-'));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const args = [...TRAIN, '--method', 'local-head'];
      const stopped = tandem(
        ['launch', ...HOSTS, ...args, '--steps', '2000', '--out', path.join(dir, 'stopped')],
        line => {
          if (line.startsWith('[host 1] {"event":"step","step":3,')) stopped.child.kill('SIGINT');
        },
      );
      t.equal(await stopped.ended, 130, 'the stopped launch exits 130') || t.comment(stopped.lines.join('\n'));
      const at = [0, 1].map(
        h =>
          (
            JSON.parse(
              stopped.lines.find(l => l.startsWith(`[host ${h}] {"event":"stopped"`))?.slice(`[host ${h}] `.length) ??
                '{}',
            ) as { step?: number }
          ).step,
      );
      t.ok(at[0] !== undefined && at[0] >= 3, `host 0 stopped after step ${at[0]}`);
      t.equal(at[1], at[0], 'both hosts stopped after the same step');
      const ckpt = checkpointPath(path.join(dir, 'stopped'), at[0]!);
      t.ok(existsSync(ckpt), `host 0 wrote ${ckpt}`);
      const steps = String(at[0]! + 2);
      await bothSucceed(t, {
        'resumed launch': tandem([
          'launch',
          ...HOSTS,
          ...args,
          '--steps',
          steps,
          '--resume',
          ckpt,
          '--out',
          path.join(dir, 'resumed'),
        ]),
        'uninterrupted one process': tandem([
          'train',
          '--devices',
          '2',
          ...args,
          '--steps',
          steps,
          '--out',
          path.join(dir, 'whole'),
        ]),
      });
      sameModels(
        t,
        path.join(dir, 'resumed'),
        path.join(dir, 'whole'),
        `stopped after ${at[0]} and resumed across hosts vs uninterrupted`,
      );
    },
  );
}
