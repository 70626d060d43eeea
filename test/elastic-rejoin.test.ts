// An elastic run on 127.0.0.1 (real processes, Gloo over sockets), 3 hosts × 1 device, --min-hosts 2: host 2 killed
// with SIGKILL mid-run; once hosts 0 and 1 went on without it, it is started again with the same arguments (the test
// doing what `tandem launch --max-restarts 1` does): it asks host 0 to join, every host ends the generation at the
// next step they agree on, and the next generation has 3 hosts again, host 2 taking host 0's parameters and optimizer
// state. All three end at the last step with bit-identical parameters, within 1e-5 of an uninterrupted 3-host run's.
// (test/elastic-launch-restart.test.ts: the same through `tandem launch --max-restarts 1`.)
// Every process is torn down.
import t from 'tap';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { freePort } from '../src/world/launch.js';
import { elasticHost, killAllHosts, worst, type ElasticHost } from './fixtures/elastic-hosts.js';

t.teardown(killAllHosts);

const STEPS = 160;
const KILL_AFTER = 10;
// a stall timeout above the fixture's 4 s: a killed host's peers see its sockets close at once; a loaded machine
// may take longer than 4 s to load a first step
const ENV = { ELASTIC_STEPS: String(STEPS), ELASTIC_STALL_MS: '15000' };

async function world(minHosts?: number): Promise<{ hosts: ElasticHost[]; rendezvous: string }> {
  const rendezvous = `127.0.0.1:${await freePort()}`;
  return { hosts: [0, 1, 2].map(r => elasticHost(r, 3, rendezvous, minHosts, undefined, ENV)), rendezvous };
}

if (glooAddonOrSkip()) {
  t.test('host 2 killed, then restarted: it rejoins and the run ends as the uninterrupted one', async t => {
    const whole = (await world()).hosts;
    const wholeEnds = await Promise.all(whole.map(h => h.ended));
    t.same(
      wholeEnds.map(e => e.code),
      [0, 0, 0],
      `the uninterrupted run: ${whole.map(h => h.result().message).join('; ')}`,
    );
    const reference = whole[0].result().weights!;

    const { hosts, rendezvous } = await world(2);
    await hosts[2].seen(new RegExp(`^step ${KILL_AFTER}$`));
    hosts[2].child.kill('SIGKILL');
    await hosts[0].seen(/^warning elastic: .*going on from step \d+ with 2 host/);
    const again = elasticHost(2, 3, rendezvous, 2, undefined, ENV);
    const [h0, h1, h2] = await Promise.all([hosts[0].ended, hosts[1].ended, again.ended]);
    const [r0, r1, r2] = [hosts[0].result(), hosts[1].result(), again.result()];
    t.equal(h0.code, 0, `host 0 exits 0: ${r0.message}`);
    t.equal(h1.code, 0, `host 1 exits 0: ${r1.message}`);
    t.equal(h2.code, 0, `host 2, restarted, exits 0: ${r2.message}`);
    t.ok(
      again.lines.some(l => /^warning elastic: host 2 was started before in this run \(restarted\)/.test(l.text)),
      'host 2 knows it was restarted',
    );
    const admitted = again.lines.find(l => /admitted by host 0: going on from step \d+ as host 2 of 3/.test(l.text));
    t.ok(admitted, `host 2 says where it goes on: ${admitted?.text}`);
    const rejoin = hosts[0].lines.find(l =>
      /^warning elastic: a host asks to join; going on from step \d+ with 3 host\(s\) .*host 2 \(restarted\) admitted/.test(
        l.text,
      ),
    );
    t.ok(rejoin, `host 0 says it admits host 2: ${rejoin?.text}`);
    const from = Number(/going on from step (\d+)/.exec(rejoin?.text ?? '')?.[1]);
    t.equal(r2.firstStep, from + 1, 'host 2 trains from the step after the one it was admitted at');
    t.ok(
      hosts[0].lines.some(l => l.text === `step ${STEPS}`),
      'host 0 reached the last step',
    );
    t.same(r0.weights, r1.weights, 'hosts 0 and 1 hold the same parameters, bit for bit');
    t.same(r2.weights, r0.weights, 'host 2 holds the same parameters, bit for bit');
    const d = worst(r0.weights!, reference);
    t.ok(d <= 1e-5, `the uninterrupted 3-host run's parameters within 1e-5 (largest difference ${d})`);
  });
}
