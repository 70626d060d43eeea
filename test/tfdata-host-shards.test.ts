// Per-host shards of a tf.data data module on 2 hosts (loopback): the factory is given { hostRank, hosts, batch } and
// each host streams only its share of every global batch (batches of --batch / hosts, the last global batch's shares
// included): `launch --hosts 2 --devices 1` ends with the replica of one process with 2 devices on the whole data,
// over 2 epochs (docs/guide/data.md, "Several hosts"); host 1's shares one batch shorter, the hosts agree on 5 global
// batches an epoch, as one process on the first 40 samples.
import t, { type Test } from 'tap';
import { fileURLToPath } from 'node:url';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { killAllTandems, summaryOf, tandem } from './fixtures/tandem-lines.js';

t.teardown(killAllTandems);
const fixture = (name: string) => fileURLToPath(new URL(`../../test/fixtures/${name}`, import.meta.url));

const RUN = ['--model', 'mlp', '--backend', 'cpu', '--batch', '8', '--no-shuffle', '--partial-batch', '--epochs', '2'];

/** `launch --hosts 2 --devices 1` on `hostsData` and one process with 2 devices on `oneData`: both lines, checked. */
async function hostsAndOne(t: Test, hostsData: string, oneData: string, steps: number): Promise<string> {
  const run = [...RUN, '--json'];
  const launch = tandem(['launch', '--hosts', '2', '--devices', '1', ...run, '--data', fixture(hostsData)]);
  const one = tandem(['train', '--devices', '2', ...run, '--data', fixture(oneData)]);
  const [h, o] = await Promise.all([launch.ended, one.ended]);
  const all = [...launch.lines, ...launch.stderr].join('\n');
  if (h.code !== 0 || o.code !== 0) t.comment([all, ...one.stderr].join('\n'));
  t.equal(h.code, 0, 'the launcher exits 0');
  t.equal(o.code, 0, 'one process exits 0');
  const single = summaryOf(one.lines);
  for (const r of [0, 1]) {
    const s = summaryOf(launch.lines, `[host ${r}] `) as ReturnType<typeof summaryOf> & { config: { steps: number } };
    t.equal(s.config.steps, steps, `host ${r} trains ${steps} steps`);
    t.equal(s.replicaChecksum, single.replicaChecksum, `host ${r}'s replica = one process's`);
  }
  return all;
}

if (glooAddonOrSkip()) {
  t.test('2 hosts each streaming its own share = one process with 2 devices on the whole data', async t => {
    const all = await hostsAndOne(t, 'tfdata-host-shard.mjs', 'tfdata-batches.mjs', 12);
    t.notMatch(all, /warning/, 'even shares: no warning');
  });

  t.test("host 1's shares one batch shorter: both end each epoch at 5 = one process on 40 samples", async t => {
    const all = await hostsAndOne(t, 'tfdata-host-shard-uneven.mjs', 'tfdata-take40.mjs', 10);
    t.match(all, /host 1's dataset ends after 5 batches an epoch \(20 samples\), host 0's after 6 \(22 samples\)/);
  });
}
