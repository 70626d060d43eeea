// Elastic runs across network namespaces (test/fixtures/host-trio.ts: three hosts on a bridge, real TCP between
// three addresses), 3 hosts × 1 device, --min-hosts 2, data-parallel:
// - host 2 killed with SIGKILL mid-run: hosts 0 and 1 go on within 10 s and end at the last step, bit-identical to
//   each other and within 1e-5 of an uninterrupted 3-host run in the same namespaces;
// - host 2's cable cut (`ip link set … down`: no FIN, no RST; its peers see silence until the Gloo timeout): handled
//   like a death, hosts 0 and 1 go on within 15 s (the Gloo call's peer wait, 8 s, then the regroup, which drops host
//   2 at once: silent since the cut) and end with the same parameters; host 2 ends by itself, saying it cannot reach
//   host 0;
// - host 2 killed, then started again in its namespace (as `tandem launch --max-restarts 1` does): admitted at a step
//   boundary, all three end with the same parameters, within 1e-5 of the uninterrupted run;
// - the same kill with 2 devices per host (the hierarchical transport) and --strategy two-group --forward-wait group;
// - host 0 killed: hosts 1 and 2 end, non-zero, saying the store's host was lost.
// Needs root and iproute2: skipped with the reason otherwise. Every process and namespace is torn down.
import t, { type Test } from 'tap';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { namespaceSupport } from '../bench/network-namespaces.js';
import { makeHostTrio, type HostTrio } from './fixtures/host-trio.js';
import { elasticHost, killAllHosts, worst, type ElasticHost } from './fixtures/elastic-hosts.js';

const PORT = 29500;
const KILL_AFTER = 15;
/** Steps of every run here: enough for a restarted host to be admitted before the end (the third world). */
const STEPS = 160;
const ENV = { ELASTIC_STEPS: String(STEPS) };
const CASE = { timeout: 120_000 };

t.teardown(killAllHosts);

function trioFor(t: Test): HostTrio {
  const trio = makeHostTrio();
  t.teardown(() => trio.close());
  t.teardown(killAllHosts);
  return trio;
}

function host(trio: HostTrio, r: number, minHosts?: number, env: NodeJS.ProcessEnv = ENV): ElasticHost {
  const rendezvous = `${trio.addresses[0]}:${PORT}`;
  return elasticHost(
    r,
    3,
    rendezvous,
    minHosts,
    (command, args, options) => trio.spawn(r, command, args, options),
    env,
  );
}

function world(trio: HostTrio, minHosts?: number, env: NodeJS.ProcessEnv = ENV): ElasticHost[] {
  return [0, 1, 2].map(r => host(trio, r, minHosts, env));
}

async function uninterrupted(t: Test, trio: HostTrio, env: NodeJS.ProcessEnv = ENV): Promise<number[][]> {
  const hosts = world(trio, undefined, env);
  const ends = await Promise.all(hosts.map(h => h.ended));
  t.same(
    ends.map(e => e.code),
    [0, 0, 0],
    `the uninterrupted run: ${hosts.map(h => h.result().message).join('; ')}`,
  );
  return hosts[0].result().weights!;
}

/** Hosts 0 and 1 ended at the last step with the same parameters, within 1e-5 of `reference`; host 0's going on. */
function wentOn(t: Test, hosts: ElasticHost[], reference: number[][], ends: { code: number | null }[], steps = STEPS) {
  const [r0, r1] = [hosts[0].result(), hosts[1].result()];
  t.equal(ends[0].code, 0, `host 0 exits 0: ${r0.message}`);
  t.equal(ends[1].code, 0, `host 1 exits 0: ${r1.message}`);
  t.ok(
    hosts[0].lines.some(l => l.text === `step ${steps}`),
    'host 0 reached the last step',
  );
  t.same(r0.weights, r1.weights, 'hosts 0 and 1 hold the same parameters, bit for bit');
  const d = worst(r0.weights ?? [], reference);
  t.ok(d <= 1e-5, `the uninterrupted 3-host run's parameters within 1e-5 (largest difference ${d})`);
  return hosts[0].lines.find(l => /^warning elastic: .*going on from step \d+ with 2 host/.test(l.text));
}

const support = namespaceSupport();
if (!support.ok) t.test('elastic runs in network namespaces', { skip: support.reason }, () => {});
else if (glooAddonOrSkip()) {
  t.test('host 2 killed, then its cable cut: hosts 0 and 1 go on; killed and restarted: it rejoins', CASE, async t => {
    const trio = trioFor(t);
    const reference = await uninterrupted(t, trio);

    const killed = world(trio, 2);
    await killed[2].seen(new RegExp(`^step ${KILL_AFTER}$`));
    const killedAt = performance.now();
    killed[2].child.kill('SIGKILL');
    const ends = await Promise.all(killed.map(h => h.ended));
    t.equal(ends[2].signal, 'SIGKILL', 'host 2 killed');
    const goingOn = wentOn(t, killed, reference, ends);
    const next = killed[0].lines.find(l => l.at > (goingOn?.at ?? Infinity) && /^step \d+$/.test(l.text));
    const seconds = ((next?.at ?? Infinity) - killedAt) / 1000;
    t.ok(seconds < 10, `host 0 completed ${next?.text} ${seconds.toFixed(1)} s after the kill`);

    const cut = world(trio, 2);
    await cut[2].seen(new RegExp(`^step ${KILL_AFTER}$`));
    const cutAt = performance.now();
    trio.setLink(2, false);
    const cutEnds = await Promise.all(cut.map(h => h.ended));
    const cutGoingOn = wentOn(t, cut, reference, cutEnds);
    const cutNext = cut[0].lines.find(l => l.at > (cutGoingOn?.at ?? Infinity) && /^step \d+$/.test(l.text));
    const cutSeconds = ((cutNext?.at ?? Infinity) - cutAt) / 1000;
    // one peer wait (the Gloo call's, 8 s), then the regroup: host 0 drops host 2 at once, silent since the cut
    // (its heartbeat), and the device threads start again; two peer waits (19 s) before heartbeats
    t.ok(cutSeconds < 15, `cable cut: host 0 completed ${cutNext?.text} ${cutSeconds.toFixed(1)} s after the cut`);
    t.equal(cutEnds[2].code, 1, `host 2, cut off, ends by itself: ${cut[2].result().message}`);
    t.match(cut[2].result().message, /host 0, which serves the rendezvous store/, 'saying it cannot reach host 0');
    trio.setLink(2, true);

    // host 2 killed, then started again in its namespace (what `tandem launch --max-restarts 1` does): admitted
    const restarted = world(trio, 2);
    await restarted[2].seen(new RegExp(`^step ${KILL_AFTER}$`));
    restarted[2].child.kill('SIGKILL');
    await restarted[0].seen(/^warning elastic: .*going on from step \d+ with 2 host/);
    const again = host(trio, 2, 2);
    const [r0End, r1End, , againEnd] = await Promise.all([...restarted.map(h => h.ended), again.ended]);
    t.equal(againEnd.code, 0, `host 2, restarted, exits 0: ${again.result().message}`);
    const admitted = restarted[0].lines.find(l => /^warning elastic: a host asks to join; .* with 3 host/.test(l.text));
    t.ok(admitted, `host 0 admits host 2 again: ${admitted?.text}`);
    wentOn(t, restarted, reference, [r0End, r1End]);
    t.same(again.result().weights, restarted[0].result().weights, 'the restarted host 2 holds the same parameters');
  });

  t.test(
    '2 devices per host (hierarchical), two-group --forward-wait group: host 2 killed, the same',
    CASE,
    async t => {
      const trio = trioFor(t);
      const steps = 60;
      const env = { ELASTIC_DEVICES: '2', ELASTIC_STRATEGY: 'two-group', ELASTIC_STEPS: String(steps) };
      const reference = await uninterrupted(t, trio, env);
      const hosts = world(trio, 2, env);
      await hosts[2].seen(new RegExp(`^step ${KILL_AFTER}$`));
      const killedAt = performance.now();
      hosts[2].child.kill('SIGKILL');
      const ends = await Promise.all(hosts.map(h => h.ended));
      t.equal(ends[2].signal, 'SIGKILL', 'host 2 killed');
      const goingOn = wentOn(t, hosts, reference, ends, steps);
      t.match(goingOn?.text, /with 2 host\(s\) .*4 device\(s\)/, 'going on with 2 hosts of 2 devices');
      const next = hosts[0].lines.find(l => l.at > (goingOn?.at ?? Infinity) && /^step \d+$/.test(l.text));
      const seconds = ((next?.at ?? Infinity) - killedAt) / 1000;
      t.ok(seconds < 10, `host 0 completed ${next?.text} ${seconds.toFixed(1)} s after the kill`);
    },
  );

  t.test('host 0 killed: hosts 1 and 2 end, saying the store host was lost', CASE, async t => {
    const trio = trioFor(t);
    const hosts = world(trio, 2);
    await hosts[0].seen(new RegExp(`^step ${KILL_AFTER}$`));
    hosts[0].child.kill('SIGKILL');
    const ends = await Promise.all(hosts.map(h => h.ended));
    for (const r of [1, 2]) {
      const result = hosts[r].result();
      t.equal(ends[r].code, 1, `host ${r} exits 1`);
      t.equal(result.code, 'PEER_LOST', `host ${r}: PEER_LOST`);
      t.match(result.message, /host 0, which serves the rendezvous store, was lost/, `host ${r} says why`);
    }
  });
}
