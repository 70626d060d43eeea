// A tf.data data module on 2 hosts (loopback): every host streams the whole dataset and its devices read their
// shards of each global batch, so `launch --hosts 2 --devices 1` ends with the replica of one process with 2 devices.
// Its dataset one batch shorter on host 1 (44 samples on host 0, 36 on host 1, batches of 8): the hosts agree before
// step 1 to end every epoch after host 1's 5 batches, host 0 warns naming host 1 and both lengths, and both end with
// the replica of one process with 2 devices on the 36 samples, over 2 epochs; resumed across hosts from the checkpoint
// of step 7 (mid epoch 2), they end with it too.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkpointPath } from '../src/checkpoint/checkpoint-file.js';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { killAllTandems, summaryOf, tandem } from './fixtures/tandem-lines.js';

t.teardown(killAllTandems);
const fixture = (name: string) => fileURLToPath(new URL(`../../test/fixtures/${name}`, import.meta.url));

const RUN = ['--model', 'mlp', '--backend', 'cpu', '--batch', '8', '--no-shuffle', '--partial-batch', '--epochs', '2'];

if (glooAddonOrSkip()) {
  t.test('launch --hosts 2 --devices 1 on a tf.data module equals one process with 2 devices', async t => {
    const data = ['--data', fixture('tfdata-shuffled.mjs'), '--seed', '4', '--json'];
    const launch = tandem(['launch', '--hosts', '2', '--devices', '1', ...RUN, ...data]);
    const one = tandem(['train', '--devices', '2', ...RUN, ...data]);
    const [h, o] = await Promise.all([launch.ended, one.ended]);
    if (h.code !== 0 || o.code !== 0) t.comment([...launch.stderr, ...one.stderr].join('\n'));
    t.equal(h.code, 0, 'launch exits 0');
    t.equal(o.code, 0, 'one process exits 0');
    const single = summaryOf(one.lines).replicaChecksum;
    for (const r of [0, 1])
      t.equal(summaryOf(launch.lines, `[host ${r}] `).replicaChecksum, single, `host ${r}'s replica = one process's`);
  });

  t.test('uneven hosts: every host ends each epoch where host 1 ends, warned, = one process; resume exact', async t => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tandem-tfdata-uneven-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const run = [...RUN, '--json', '--checkpoint-every', '7'];
    const uneven = ['launch', '--hosts', '2', '--devices', '1', ...run, '--data', fixture('tfdata-uneven.mjs')];
    const launch = tandem([...uneven, '--out', path.join(dir, 'full')]);
    const one = tandem([
      'train',
      '--devices',
      '2',
      ...run,
      '--data',
      fixture('tfdata-take36.mjs'),
      '--out',
      path.join(dir, 'one'),
    ]);
    const [h, o] = await Promise.all([launch.ended, one.ended]);
    const all = [...launch.lines, ...launch.stderr].join('\n');
    if (h.code !== 0 || o.code !== 0) t.comment([all, ...one.stderr].join('\n'));
    t.equal(h.code, 0, 'the launcher exits 0');
    t.match(all, /host 1's dataset ends after 5 batches an epoch \(36 samples\), host 0's after 6 \(44 samples\)/);
    const single = summaryOf(one.lines).replicaChecksum;
    type Summary = ReturnType<typeof summaryOf> & { config: { steps: number } };
    for (const r of [0, 1]) {
      const s = summaryOf(launch.lines, `[host ${r}] `) as Summary;
      t.equal(s.config.steps, 10, `host ${r} trains 2 epochs of 5 steps`);
      t.equal(s.replicaChecksum, single, `host ${r}'s replica = one process's on the 36 samples`);
    }
    // step 7 is in epoch 2: the resumed streams, cut again, skip to its batch 2
    const resumed = tandem([
      ...uneven,
      '--resume',
      checkpointPath(path.join(dir, 'full'), 7),
      '--out',
      path.join(dir, 'r'),
    ]);
    const r = await resumed.ended;
    if (r.code !== 0) t.comment([...resumed.lines, ...resumed.stderr].join('\n'));
    t.ok(
      resumed.lines.some(l => l.startsWith('[host 0] {"event":"started"') && l.includes('"firstStep":8')),
      'resumed at step 8',
    );
    for (const host of [0, 1])
      t.equal(summaryOf(resumed.lines, `[host ${host}] `).replicaChecksum, single, `host ${host} resumed at 7: exact`);
  });
}
