// Elastic runs on 127.0.0.1 (real processes, Gloo over sockets): 3 hosts × 1 device, --min-hosts 2, data-parallel.
// - host 2 killed with SIGKILL mid-run: hosts 0 and 1 regroup and go on within 10 s, from the last step they
//   completed, in memory; both exit 0 at the last step with bit-identical parameters, equal to an uninterrupted
//   3-host run's within 1e-5 (the global batch re-split over 2 devices: only the order of float additions differs);
//   (with 2 devices per host and --strategy two-group: test/elastic-namespaces.test.ts);
// - host 1 frozen (SIGSTOP) for 6 s as host 2 dies, longer than the stall timeout (4 s), shorter than the peer wait
//   (8 s): host 0 waits for it (its store connection is open: slow, not dead) and both go on;
// - --min-hosts 3 and host 2 killed: hosts 0 and 1 end saying why, host 0 with a checkpoint of the agreed step;
// - host 0 killed (it serves the rendezvous store): hosts 1 and 2 end, non-zero, saying host 0 was lost.
// Every process is torn down.
import t, { type Test } from 'tap';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { freePort } from '../src/world/launch.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { checkpointSteps } from '../src/checkpoint/checkpoint-file.js';
import { elasticHost, killAllHosts, worst, type ElasticHost } from './fixtures/elastic-hosts.js';

t.teardown(killAllHosts);

/** The kill comes once the victim reported this step (of 120). */
const KILL_AFTER = 15;
/** The fixture's stall timeout is 4 s (a host silent for twice that is dropped): a freeze between the two. */
const FROZEN_MS = 6000;

async function world(minHosts?: number, env: NodeJS.ProcessEnv = {}): Promise<ElasticHost[]> {
  const rendezvous = `127.0.0.1:${await freePort()}`;
  return [0, 1, 2].map(r => elasticHost(r, 3, rendezvous, minHosts, undefined, env));
}

/** `env`: the fixture's settings (test/fixtures/elastic-host.ts); `steps`: the run's. */
function hostTwoKilled(env: NodeJS.ProcessEnv, steps: number) {
  return async (t: Test) => {
    const whole = await world(undefined, env);
    const ends = await Promise.all(whole.map(h => h.ended));
    t.same(
      ends.map(e => e.code),
      [0, 0, 0],
      `the uninterrupted run: ${whole.map(h => h.result().message).join('; ')}`,
    );
    const reference = whole[0].result().weights!;

    const hosts = await world(2, env);
    await hosts[2].seen(new RegExp(`^step ${KILL_AFTER}$`));
    const killedAt = performance.now();
    hosts[2].child.kill('SIGKILL');
    const [h0, h1, h2] = await Promise.all(hosts.map(h => h.ended));
    t.equal(h2.signal, 'SIGKILL', 'host 2 killed');
    const [r0, r1] = [hosts[0].result(), hosts[1].result()];
    t.equal(h0.code, 0, `host 0 exits 0: ${r0.message}`);
    t.equal(h1.code, 0, `host 1 exits 0: ${r1.message}`);
    const goingOn = hosts[0].lines.find(l => /^warning elastic: .*going on from step (\d+) with 2 host/.test(l.text));
    t.ok(goingOn, 'host 0 says it goes on with 2 hosts');
    const from = Number(/going on from step (\d+)/.exec(goingOn?.text ?? '')?.[1]);
    t.ok(from >= KILL_AFTER - 1, `from step ${from}, after the kill's step ${KILL_AFTER}`);
    t.equal(r0.firstStep, from + 1, "host 0's last generation started at the next step");
    const next = hosts[0].lines.find(l => l.at > (goingOn?.at ?? Infinity) && /^step \d+$/.test(l.text));
    const seconds = ((next?.at ?? Infinity) - killedAt) / 1000;
    t.ok(seconds < 10, `host 0 completed ${next?.text} ${seconds.toFixed(1)} s after the kill`);
    t.ok(
      hosts[0].lines.some(l => l.text === `step ${steps}`),
      'host 0 reached the last step',
    );
    t.same(r0.weights, r1.weights, 'hosts 0 and 1 hold the same parameters, bit for bit');
    const d = worst(r0.weights!, reference);
    t.ok(d <= 1e-5, `the uninterrupted 3-host run's parameters within 1e-5 (largest difference ${d})`);
  };
}

if (glooAddonOrSkip()) {
  t.test('host 2 killed: hosts 0 and 1 go on and end with the uninterrupted run parameters', hostTwoKilled({}, 120));

  t.test('host 1 frozen through the regroup, longer than the stall timeout: kept, not dropped', async t => {
    const hosts = await world(2);
    await hosts[2].seen(new RegExp(`^step ${KILL_AFTER}$`));
    hosts[1].child.kill('SIGSTOP');
    hosts[2].child.kill('SIGKILL');
    // host 0 regroups at once (host 2's process is gone) and waits for host 1, whose store connection stays open
    await new Promise(resolve => setTimeout(resolve, FROZEN_MS)); // the freeze itself is what is tested
    hosts[1].child.kill('SIGCONT');
    const ends = await Promise.all(hosts.map(h => h.ended));
    const [r0, r1] = [hosts[0].result(), hosts[1].result()];
    t.equal(ends[0].code, 0, `host 0 exits 0: ${r0.message}`);
    t.equal(ends[1].code, 0, `host 1 exits 0: ${r1.message}`);
    t.ok(
      hosts[0].lines.some(l => /^warning elastic: .*going on from step \d+ with 2 host/.test(l.text)),
      'host 0 went on with hosts 0 and 1',
    );
    t.same(r0.weights, r1.weights, 'hosts 0 and 1 hold the same parameters, bit for bit');
  });

  t.test('below --min-hosts: hosts 0 and 1 end, host 0 checkpoints the step they completed', async t => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tandem-elastic-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const hosts = await world(3, { ELASTIC_CHECKPOINT_DIR: dir });
    await hosts[2].seen(new RegExp(`^step ${KILL_AFTER}$`));
    hosts[2].child.kill('SIGKILL');
    const ends = await Promise.all(hosts.map(h => h.ended));
    for (const r of [0, 1]) {
      t.equal(ends[r].code, 1, `host ${r} exits 1`);
      t.match(hosts[r].result().message, /2 host\(s\) remain, fewer than --min-hosts 3/, `host ${r} says why`);
    }
    const saved = /checkpoint of step (\d+), the last step this host completed: (\S+)/.exec(
      hosts[0].result().message ?? '',
    );
    t.ok(saved, `host 0 names its checkpoint: ${hosts[0].result().message}`);
    t.ok(Number(saved?.[1]) >= KILL_AFTER - 1, `of step ${saved?.[1]}, at or after the kill's`);
    t.ok((await checkpointSteps(dir)).includes(Number(saved?.[1])), 'the checkpoint is in the directory');
  });

  t.test('host 0 killed: hosts 1 and 2 end, saying the store host was lost', async t => {
    const hosts = await world(2);
    await hosts[0].seen(new RegExp(`^step ${KILL_AFTER}$`));
    hosts[0].child.kill('SIGKILL');
    const ends = await Promise.all(hosts.map(h => h.ended));
    t.equal(ends[0].signal, 'SIGKILL', 'host 0 killed');
    for (const r of [1, 2]) {
      const result = hosts[r].result();
      t.equal(ends[r].code, 1, `host ${r} exits 1`);
      t.equal(result.code, 'PEER_LOST', `host ${r}: PEER_LOST`);
      t.match(result.message, /host 0, which serves the rendezvous store, was lost/, `host ${r} says why`);
    }
  });
}
