// An elastic run on 127.0.0.1 (real processes, Gloo over sockets), 3 hosts × 1 device, --min-hosts 2: host 2 killed
// mid-run and started again with another learning rate. Host 0 refuses it at once, naming the flag (it used to admit
// it: the next generation's flag agreement then failed on every host, ending the run the restart was meant to keep):
// host 2 ends ABORTED, hosts 0 and 1 go on to the last step and exit 0. The same when host 2 is started again with the
// same flags and a model path that gives another model (a path is each host's own): host 2 builds its model before it
// asks, and host 0 compares it with its own. Every process is torn down.
import t from 'tap';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { freePort } from '../src/world/launch.js';
import { elasticHost, killAllHosts } from './fixtures/elastic-hosts.js';

t.teardown(killAllHosts);

const STEPS = 160;
const KILL_AFTER = 10;
const ENV = { ELASTIC_STEPS: String(STEPS), ELASTIC_STALL_MS: '15000' };
const modelFile = (name: string) => new URL(`../../test/fixtures/models/${name}`, import.meta.url).pathname;

if (glooAddonOrSkip()) {
  t.test('host 2 restarted with another --lr: refused, naming it; hosts 0 and 1 go on to the end', async t => {
    const rendezvous = `127.0.0.1:${await freePort()}`;
    const hosts = [0, 1, 2].map(r => elasticHost(r, 3, rendezvous, 2, undefined, ENV));
    await hosts[2].seen(new RegExp(`^step ${KILL_AFTER}$`));
    hosts[2].child.kill('SIGKILL');
    await hosts[0].seen(/^warning elastic: .*going on from step \d+ with 2 host/);
    const again = elasticHost(2, 3, rendezvous, 2, undefined, { ...ENV, ELASTIC_LR: '0.5' });
    const [h0, h1, h2] = await Promise.all([hosts[0].ended, hosts[1].ended, again.ended]);
    const [r0, r1, r2] = [hosts[0].result(), hosts[1].result(), again.result()];
    t.equal(h2.code, 1, 'host 2, restarted with another --lr, exits 1');
    t.equal(r2.code, 'ABORTED', `host 2 ends ABORTED: ${r2.message}`);
    t.match(r2.message, /not admitted .*started with different flags — lr: 0\.01 on host 0, 0\.5 on host 2/);
    t.ok(
      hosts[0].lines.some(l => /^warning elastic: not admitted: host 2 \(restarted\) .* lr: /.test(l.text)),
      'host 0 says whom it refused and why',
    );
    t.equal(h0.code, 0, `host 0 exits 0: ${r0.message}`);
    t.equal(h1.code, 0, `host 1 exits 0: ${r1.message}`);
    t.ok(
      hosts[0].lines.some(l => l.text === `step ${STEPS}`),
      'host 0 reached the last step',
    );
    t.same(r0.weights, r1.weights, 'hosts 0 and 1 hold the same parameters, bit for bit');
  });

  t.test(
    'host 2 restarted with a model path giving another model: refused, naming the layer; 0 and 1 go on',
    async t => {
      const rendezvous = `127.0.0.1:${await freePort()}`;
      const env = { ...ENV, ELASTIC_MODEL: modelFile('dense-softmax.mjs') };
      const hosts = [0, 1, 2].map(r => elasticHost(r, 3, rendezvous, 2, undefined, env));
      await hosts[2].seen(new RegExp(`^step ${KILL_AFTER}$`));
      hosts[2].child.kill('SIGKILL');
      await hosts[0].seen(/^warning elastic: .*going on from step \d+ with 2 host/);
      // the same layers' tensors, with regularizers: another model on the same flags
      const again = elasticHost(2, 3, rendezvous, 2, undefined, { ...ENV, ELASTIC_MODEL: modelFile('l2-softmax.mjs') });
      const [h0, h1, h2] = await Promise.all([hosts[0].ended, hosts[1].ended, again.ended]);
      const [r0, r1, r2] = [hosts[0].result(), hosts[1].result(), again.result()];
      t.equal(h2.code, 1, 'host 2, restarted with another model, exits 1');
      t.equal(r2.code, 'ABORTED', `host 2 ends ABORTED: ${r2.message}`);
      t.match(r2.message, /not admitted .*different flags — model layer \d+: .* on host 0, .* on host 2/);
      t.match(r2.message, /a model path must give the same model/);
      t.equal(h0.code, 0, `host 0 exits 0: ${r0.message}`);
      t.equal(h1.code, 0, `host 1 exits 0: ${r1.message}`);
      t.same(r0.weights, r1.weights, 'hosts 0 and 1 hold the same parameters, bit for bit');
    },
  );
}
