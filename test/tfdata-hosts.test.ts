// A tf.data data module on 2 hosts (loopback): every host streams the whole dataset and its devices read their
// shards of each global batch, so `launch --hosts 2 --devices 1` ends with the replica of one process with 2 devices.
// Its dataset one batch shorter on host 1: today the hosts do not
// agree on a common end; they refuse to start, before any step and without hanging, each naming the other host and
// both dataset sizes, and the launcher exits non-zero naming the host that failed first (docs/guide/data.md says so).
import t from 'tap';
import { fileURLToPath } from 'node:url';
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

  t.test('uneven hosts: refused before any step, naming host 1 and both sizes', async t => {
    const launch = tandem(
      ['launch', '--hosts', '2', '--devices', '1', '--model', 'mlp', '--data', fixture('tfdata-uneven.mjs')].concat([
        '--backend',
        'cpu',
        '--batch',
        '8',
        '--no-shuffle',
        '--partial-batch',
        '--epochs',
        '1',
      ]),
    );
    const ended = await launch.ended;
    const all = [...launch.lines, ...launch.stderr].join('\n');
    t.not(ended.code, 0, 'the launcher exits non-zero');
    t.match(all, /dataset size: 44 on host 0, 36 on host 1/, 'host 0 names host 1 and both dataset sizes');
    t.notMatch(all, /step 1 /, 'no step ran');
  });
}
