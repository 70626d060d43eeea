// The stranger of hosts-stranger.test.ts, across a real network: host 0 and host 1 each in a network namespace joined
// by a veth pair (bench/network-namespaces.ts), the stranger in a third namespace with its own link to host 0's
// namespace and a route to host 0's address (not host 1's). While host 0 waits for host 1, the stranger
// (test/fixtures/store-stranger.ts, its own process in its namespace) tries without the secret to read the resume key
// and host 0's flags, to add a stop wish, to set a counter key, to join as host 1, to send a malformed and an
// oversize request, and with a wrong secret to connect. Each is refused (the store answers nothing; the wrong secret
// is told so), host 0 logs each naming the stranger's address, and both hosts finish with weights.bin bit-identical
// to the same job undisturbed in the same namespaces. Needs root and iproute2: skipped with the reason otherwise.
import t, { type Test } from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { killAllTandems, tandem } from './fixtures/tandem-lines.js';
import { ATTEMPTS, type StrangerResult } from './fixtures/store-stranger.js';
import { smallRunArgs } from './fixtures/small-run.js';
import { makeHostPair, namespaceSupport, type HostPair } from '../bench/network-namespaces.js';

const STRANGER = fileURLToPath(new URL('./fixtures/store-stranger.js', import.meta.url));
const PORT = 29517;
const TRAIN = [
  ...['train', '--hosts', '2', '--devices', '1'],
  ...smallRunArgs({ seed: 3, steps: 4, strategy: 'sequential' }),
  ...['--transport', 'gloo'],
];

t.teardown(killAllTandems);

/** Host `rank` of the job, in its namespace; host 0 writes to `out`. */
function host(net: HostPair, rank: 0 | 1, out?: string) {
  const args = [...TRAIN, '--rendezvous', `${net.addresses[0]}:${PORT}`, '--host-rank', String(rank)];
  return tandem([...args, ...(out ? ['--out', out] : [])], undefined, (command, argv) =>
    net.spawn(rank, command, argv, { stdio: ['ignore', 'pipe', 'pipe'] }),
  );
}

/** The stranger's attempts from its own namespace, once host 0's store listens; what it saw. */
async function strangerRun(t: Test, net: HostPair): Promise<{ address: string; result: StrangerResult }> {
  const stranger = net.addStranger();
  const { TANDEM_JOB_SECRET, ...env } = process.env; // a stranger does not hold the job's secret
  void TANDEM_JOB_SECRET;
  const child = stranger.spawn(process.execPath, [STRANGER, net.addresses[0], String(PORT)], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  const [code] = (await once(child, 'close')) as [number | null];
  t.equal(code, 0, `the stranger's process ran its attempts from ${stranger.address}`);
  return { address: stranger.address, result: JSON.parse(out) as StrangerResult };
}

/** The job in `net`; `between` runs once host 0 started, before host 1 does. */
async function job(net: HostPair, out: string, between: () => Promise<void>) {
  const host0 = host(net, 0, out);
  await between();
  const host1 = host(net, 1);
  const [e0, e1] = await Promise.all([host0.ended, host1.ended]);
  return { e0, e1, host0, host1 };
}

const support = namespaceSupport();
if (!support.ok) {
  t.test('a stranger in a third network namespace', { skip: support.reason }, () => {});
} else if (glooAddonOrSkip()) {
  t.test('a stranger in a third namespace cannot read, write, stop or join a job in two others', async t => {
    const net = makeHostPair();
    t.teardown(() => net.close());
    t.teardown(killAllTandems);
    const dir = mkdtempSync(path.join(tmpdir(), 'tandem-netns-stranger-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));

    const quiet = await job(net, path.join(dir, 'quiet'), async () => {});
    t.equal(quiet.e0.code, 0, `undisturbed host 0: ${quiet.host0.stderr.join('\n')}`);
    t.equal(quiet.e1.code, 0, `undisturbed host 1: ${quiet.host1.stderr.join('\n')}`);
    let seen: { address: string; result: StrangerResult } | undefined;
    const attacked = await job(net, path.join(dir, 'attacked'), async () => {
      seen = await strangerRun(t, net);
    });
    t.same(
      seen?.result.answers,
      ATTEMPTS.map(() => 0),
      'the store answered the stranger nothing',
    );
    t.match(seen?.result.wrongSecret, { code: 'BAD_CONFIG', message: /does not hold this job's secret/ });
    t.equal(attacked.e0.code, 0, `attacked host 0: ${attacked.host0.stderr.join('\n')}`);
    t.equal(attacked.e1.code, 0, `attacked host 1: ${attacked.host1.stderr.join('\n')}`);
    const from = new RegExp(`the rendezvous store refused ${seen?.address.replace(/\./g, '\\.')}:\\d+`);
    const refused = attacked.host0.stderr.filter(l => from.test(l));
    t.ok(
      refused.length >= ATTEMPTS.length + 1,
      `host 0 logged each refusal, naming the stranger's address:\n${refused.join('\n')}`,
    );
    t.ok(
      readFileSync(path.join(dir, 'attacked', 'weights.bin')).equals(
        readFileSync(path.join(dir, 'quiet', 'weights.bin')),
      ),
      'weights.bin bit-identical to the undisturbed run',
    );
  });
}
