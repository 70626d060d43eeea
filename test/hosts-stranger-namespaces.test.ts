// The stranger of hosts-stranger.test.ts, across a real network: host 0 and host 1 each in a network namespace joined
// by a veth pair (bench/network-namespaces.ts), the stranger in a third namespace with its own link to host 0's
// namespace and a route to host 0's address (not host 1's). While host 0 waits for host 1, the stranger
// (test/fixtures/store-stranger.ts, its own process in its namespace) tries without the secret to read the resume key
// and host 0's flags, to add a stop wish, to set a counter key, to join as host 1, to send a malformed and an
// oversize request, and with a wrong secret to connect. Then, while both hosts run, it tries host 0's monitor hub
// (test/fixtures/hub-stranger.ts): without the secret, plain frames claiming host 1's step, a hello as host
// `__proto__`, host 1's end and a warning with terminal escapes, a line over the bound, and the handshake answered
// with a forged proof; with a wrong secret, a MonitorLink as host 1. The hub's port is published only in the
// authenticated store: the test reads it there as a job host would (test/fixtures/monitor-port.ts, with the secret,
// from host 1's namespace) and hands it to the stranger, holding host 1 stopped (SIGSTOP) from the moment it is
// published until the stranger is done, so the hub still listens (the job's output is the synchronisation, no
// sleeps). Each attempt is refused (the store and hub answer nothing; the wrong secret is told so; the forged proof
// gets no OK), host 0 logs each naming the stranger's address, and both hosts finish with weights.bin bit-identical
// to the same job undisturbed in the same namespaces. Needs root and iproute2: skipped with the reason otherwise.
import t, { type Test } from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { once } from 'node:events';
import type { ChildProcess, SpawnOptions } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { killAllTandems, tandem, type TandemProcess } from './fixtures/tandem-lines.js';
import { ATTEMPTS, type StrangerResult } from './fixtures/store-stranger.js';
import { HUB_ATTEMPTS, type HubStrangerResult } from './fixtures/hub-stranger.js';
import { smallRunArgs } from './fixtures/small-run.js';
import { makeHostPair, namespaceSupport, type HostPair, type Stranger } from '../bench/network-namespaces.js';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}.js`, import.meta.url));
const PORT = 29517;
/** A fixture's stdout read, its stderr shown. */
const PIPED: SpawnOptions = { stdio: ['pipe', 'pipe', 'inherit'] };
const TRAIN = [
  ...['train', '--hosts', '2', '--devices', '1'],
  ...smallRunArgs({ seed: 3, steps: 4, strategy: 'sequential' }),
  ...['--transport', 'gloo'],
];

/**
 * Why host 0's hub refused each of the stranger's attempts: the plain frames, the oversize line (HUB_ATTEMPTS' last),
 * the forged proof and the wrong secret's link (which leaves once it sees the hub's proof is not of its secret).
 */
const HUB_REFUSED = [
  ...HUB_ATTEMPTS.slice(0, -1).map(() => /: it did not open with tandem's hub handshake/),
  /: it sent a handshake line over \d+ bytes/,
  /: it failed the challenge: its job secret is not this job/,
  /: it closed the connection during the handshake/,
];

t.teardown(killAllTandems);

/** Host `rank` of the job, in its namespace; host 0 writes to `out`. */
function host(net: HostPair, rank: 0 | 1, out?: string) {
  const args = [...TRAIN, '--rendezvous', `${net.addresses[0]}:${PORT}`, '--host-rank', String(rank)];
  return tandem([...args, ...(out ? ['--out', out] : [])], undefined, (command, argv) =>
    net.spawn(rank, command, argv, { stdio: ['ignore', 'pipe', 'pipe'] }),
  );
}

/** A fixture's process (killed at teardown if still running); its exit code and stdout once it closed. */
function started(t: Test, child: ChildProcess) {
  t.teardown(() => child.kill('SIGKILL'));
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  const closed = once(child, 'close').then(([code]) => ({ code: code as number | null, out }));
  return { child, closed };
}

/** The stranger's process `name` (store-stranger or hub-stranger) in its namespace, without the job's secret. */
function strangerProcess(t: Test, stranger: Stranger, name: string, args: string[]) {
  const { TANDEM_JOB_SECRET, ...env } = process.env; // a stranger does not hold the job's secret
  void TANDEM_JOB_SECRET;
  const child = stranger.spawn(process.execPath, [fixture(name), ...args], { ...PIPED, env });
  return started(t, child);
}

/** The store attempts from the stranger's namespace, once host 0's store listens; what it saw. */
async function storeAttack(t: Test, net: HostPair, stranger: Stranger): Promise<StrangerResult> {
  const { code, out } = await strangerProcess(t, stranger, 'store-stranger', [net.addresses[0], String(PORT)]).closed;
  t.equal(code, 0, `the stranger's process ran its store attempts from ${stranger.address}`);
  return JSON.parse(out) as StrangerResult;
}

/**
 * The hub attempts: started before the job (its process waits for the port on stdin), the port read by a job host's
 * means once host 0 publishes it; host 1 stopped meanwhile, so the job (and its hub) is still there.
 */
function hubAttack(t: Test, net: HostPair, stranger: Stranger) {
  const attacker = strangerProcess(t, stranger, 'hub-stranger', [net.addresses[0]]);
  const reader = started(
    t,
    net.spawn(1, process.execPath, [fixture('monitor-port'), net.addresses[0], String(PORT)], PIPED),
  );
  return async (host1: TandemProcess): Promise<HubStrangerResult> => {
    const port = await reader.closed;
    t.equal(port.code, 0, `a holder of the secret read the hub's port ${port.out.trim()} from the store`);
    host1.child.kill('SIGSTOP');
    try {
      attacker.child.stdin!.end(port.out);
      const { code, out } = await attacker.closed;
      t.equal(code, 0, `the stranger's process ran its hub attempts from ${stranger.address}`);
      return JSON.parse(out) as HubStrangerResult;
    } finally {
      host1.child.kill('SIGCONT');
    }
  };
}

/** The job in `net`; `between` runs once host 0 started, before host 1 does; `during` once host 1 started. */
async function job<T>(
  net: HostPair,
  out: string,
  between: () => Promise<void>,
  during: (host1: TandemProcess) => Promise<T>,
) {
  const host0 = host(net, 0, out);
  await between();
  const host1 = host(net, 1);
  const [e0, e1, seen] = await Promise.all([host0.ended, host1.ended, during(host1)]);
  return { e0, e1, host0, host1, seen };
}

/** Host 0's stderr lines where `what` refused the stranger at `address`. */
function refusals(host0: TandemProcess, what: string, address: string): string[] {
  const from = new RegExp(`the ${what} refused ${address.replace(/\./g, '\\.')}:\\d+`);
  return host0.stderr.filter(l => from.test(l));
}

const support = namespaceSupport();
if (!support.ok) {
  t.test('a stranger in a third network namespace', { skip: support.reason }, () => {});
} else if (glooAddonOrSkip()) {
  t.test(
    'a stranger in a third namespace cannot read, write, stop or join a job in two others, nor feed its hub',
    async t => {
      const net = makeHostPair();
      t.teardown(() => net.close());
      t.teardown(killAllTandems);
      const dir = mkdtempSync(path.join(tmpdir(), 'tandem-netns-stranger-'));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));

      const quiet = await job(
        net,
        path.join(dir, 'quiet'),
        async () => {},
        async () => {},
      );
      t.equal(quiet.e0.code, 0, `undisturbed host 0: ${quiet.host0.stderr.join('\n')}`);
      t.equal(quiet.e1.code, 0, `undisturbed host 1: ${quiet.host1.stderr.join('\n')}`);
      const stranger = net.addStranger();
      let store: StrangerResult | undefined;
      const attacked = await job(
        net,
        path.join(dir, 'attacked'),
        async () => {
          store = await storeAttack(t, net, stranger);
        },
        hubAttack(t, net, stranger),
      );
      t.same(
        store?.answers,
        ATTEMPTS.map(() => 0),
        'the store answered the stranger nothing',
      );
      t.match(store?.wrongSecret, { code: 'BAD_CONFIG', message: /does not hold this job's secret/ });
      const hub = attacked.seen;
      t.same(
        hub.answers,
        HUB_ATTEMPTS.map(() => 0),
        "the hub answered the stranger's plain frames nothing",
      );
      t.same(
        hub.forgedProof,
        { challenged: true, afterProof: '' },
        'the hub challenged the forged proof, then refused',
      );
      t.match(hub.wrongSecret, { message: /the hub does not hold this job's secret/ }, 'a wrong secret');
      t.equal(attacked.e0.code, 0, `attacked host 0: ${attacked.host0.stderr.join('\n')}`);
      t.equal(attacked.e1.code, 0, `attacked host 1: ${attacked.host1.stderr.join('\n')}`);
      const byStore = refusals(attacked.host0, 'rendezvous store', stranger.address);
      t.ok(byStore.length >= ATTEMPTS.length + 1, `host 0's store logged each refusal:\n${byStore.join('\n')}`);
      const byHub = refusals(attacked.host0, 'monitor hub', stranger.address);
      t.match(byHub, HUB_REFUSED, `host 0's hub logged each refusal, in order:\n${byHub.join('\n')}`);
      t.equal(byHub.length, HUB_REFUSED.length, 'one refusal logged per attempt on the hub');
      t.ok(
        readFileSync(path.join(dir, 'attacked', 'weights.bin')).equals(
          readFileSync(path.join(dir, 'quiet', 'weights.bin')),
        ),
        'weights.bin bit-identical to the undisturbed run',
      );
    },
  );
}
