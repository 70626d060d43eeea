// Two hosts on one machine in two network namespaces joined by a veth pair (bench/network-namespaces.ts: a real TCP
// path
// through the kernel between two addresses, not loopback), each host's `tandem train --hosts 2 --host-rank R
// --rendezvous ADDR0:PORT --devices 1` inside its own namespace:
// - they train to the parameters of one process with --devices 2 (replica checksums, weights.bin byte for byte), host 1
//   frozen (SIGSTOP) for a while on the way (longer than a step and than the stall timeout, shorter than the peer
//   wait):
//   not taken for dead, the run finishes normally with the same bits (one run proves both: the suite's time);
// - host 1 killed with SIGKILL: host 0 exits non-zero, naming host 1, its address and the step; host 0
//   killed (it serves the rendezvous store): the same for host 1;
// - the link cut (`ip link set … down`): both end by themselves after the peer wait (twice --stall-timeout-ms),
// non-zero,
//   each naming the other (rank, address) and the step;
// - host 1 frozen (SIGSTOP) for good: host 0 ends after the peer wait naming it; host 1, let go, ends by itself;
// - after host 1 is killed, host 0's last checkpoint is intact and resuming from it gives the bits of an uninterrupted
// run.
// Needs root and iproute2: skipped with the reason otherwise. Every process and namespace is torn down, even on
// failure.
import t, { type Test } from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import {
  beforeEnd,
  firstLine,
  killAllTandems,
  summaryOf,
  tandem,
  type TandemProcess,
} from './fixtures/tandem-lines.js';
import { makeHostPair, namespaceSupport, type HostPair } from '../bench/network-namespaces.js';
import { checkpointSteps } from '../src/checkpoint/checkpoint-file.js';
import { withFlags } from './fixtures/flag-args.js';
import { smallRunArgs } from './fixtures/small-run.js';

/** The watchdog's time; a host waits for a silent peer twice this. */
const STALL_MS = 3000;
const PEER_WAIT_MS = 2 * STALL_MS;
const PORT = 29500;
// --verbose: host 1 prints its steps too
const TRAIN = [...smallRunArgs({ seed: 3, strategy: 'sequential' }), '--optimizer', 'adam', '--json', '--verbose'];
/** Steps of the runs that finish (and of the one-process reference). */
const STEPS = 12;
const MANY_STEPS = 100000;
/** A case that hangs fails at this (tap's default is the whole file's 300 s). */
const CASE = { timeout: 90_000 };

t.teardown(killAllTandems);

type Rank = 0 | 1;

/** Host `rank` of `net`, in its namespace; `args` after the train flags (in place of the ones they give). */
function host(net: HostPair, rank: Rank, args: string[], onLine?: (line: string) => void): TandemProcess {
  return tandem(
    [
      'train',
      '--hosts',
      '2',
      '--host-rank',
      String(rank),
      '--rendezvous',
      `${net.addresses[0]}:${PORT}`,
      '--devices',
      '1',
      ...withFlags([...TRAIN, '--stall-timeout-ms', String(STALL_MS)], args),
    ],
    onLine,
    (command, argv) => net.spawn(rank, command, argv, { stdio: ['ignore', 'pipe', 'pipe'] }),
  );
}

/** Both hosts; `onLine(rank, line)` sees every line of each. */
function hosts(
  net: HostPair,
  args: string[],
  onLine: (rank: Rank, line: string) => void = () => {},
): [TandemProcess, TandemProcess] {
  return [host(net, 0, args, l => onLine(0, l)), host(net, 1, args, l => onLine(1, l))];
}

/** A host pair for one test, deleted at its end (after its processes: t.teardown runs in reverse order). */
function pairFor(t: Test): HostPair {
  const net = makeHostPair();
  t.teardown(() => net.close());
  t.teardown(killAllTandems);
  return net;
}

function tempDir(t: Test): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'tandem-netns-'));
  t.teardown(() => {
    killAllTandems();
    rmSync(dir, { recursive: true, force: true, maxRetries: 10 });
  });
  return dir;
}

/** Resolves once host `rank` reported step `step` (rejects if it ends first). */
function stepSeen(procs: [TandemProcess, TandemProcess], seen: Promise<string>, rank: Rank): Promise<string> {
  return beforeEnd(seen, procs[rank], `host ${rank}`);
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** The failure message names host `rank` and its address, and a step. */
function namesHost(t: Test, proc: TandemProcess, rank: Rank, address: string, who: string): void {
  const message = proc.stderr.join('\n');
  t.match(
    message,
    new RegExp(`host ${rank}\\b[^\\n]*\\b${escape(address)}\\b`),
    `${who} names host ${rank} and its address ${address}: ${message}`,
  );
  t.match(message, /step \d+/, `${who} names the step`);
}

/** One process with --devices 2 (the same global batch): the bits 2 hosts × 1 device must give (test/hosts.test.ts). */
async function oneProcess(t: Test, steps: number, out: string): Promise<string> {
  const one = tandem(['train', '--devices', '2', ...TRAIN, '--steps', String(steps), '--out', out]);
  const end = await one.ended;
  t.equal(end.code, 0, `one process, ${steps} steps: ${one.stderr.join('\n')}`);
  return summaryOf(one.lines).replicaChecksum;
}

const support = namespaceSupport();
if (!support.ok) {
  t.test('network namespace tests', { skip: support.reason }, () => {});
} else if (glooAddonOrSkip()) {
  let reference: Promise<{ checksum: string; weights: Buffer }> | undefined;
  /** The one-process run of STEPS steps (once, shared by the tests that compare with it). */
  const referenceRun = (t: Test) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tandem-netns-ref-'));
    reference ??= oneProcess(t, STEPS, dir)
      .then(checksum => ({ checksum, weights: readFileSync(path.join(dir, 'weights.bin')) }))
      .finally(() => rmSync(dir, { recursive: true, force: true }));
    return reference;
  };

  t.test(
    'a slow link (tc tbf 100mbit): the last exchange reaches the other host before either closes; both exit 0, ' +
      'together',
    CASE,
    async t => {
      // A host used to reset its connections at the end (Gloo's hard close), dropping its last message still in the
      // socket's send buffer on a slow link: the other host then waited out the peer wait and failed (6 runs of 6).
      const net = pairFor(t);
      net.shape('100mbit');
      const procs = hosts(net, ['--steps', '3', '--model', 'alexnet-mini', '--image-size', '32x32x3', '--batch', '32']);
      const [e0, e1] = await Promise.all([procs[0].ended, procs[1].ended]);
      t.equal(e0.code, 0, `host 0: ${procs[0].stderr.join('\n')}`);
      t.equal(e1.code, 0, `host 1: ${procs[1].stderr.join('\n')}`);
      t.comment(`the hosts ended ${Math.abs(e0.at - e1.at)} ms apart (peer wait ${PEER_WAIT_MS} ms)`);
    },
  );

  // Host 1 killed: the checkpoint test at the end (the same kill, the same checks on host 0's end; the suite's time).
  t.test(
    'host 0 (serving the store) killed with SIGKILL: host 1 exits non-zero, naming it, its address and the step',
    CASE,
    async t => {
      const net = pairFor(t);
      const stepping = firstLine(/^\{"event":"step","step":3\b/);
      const procs = hosts(net, ['--steps', String(MANY_STEPS)], (r, l) => {
        if (r === 0) stepping.onLine(l);
      });
      await stepSeen(procs, stepping.seen, 0);
      const killedAt = Date.now();
      procs[0].child.kill('SIGKILL');
      const end = await procs[1].ended;
      t.not(end.code, 0, 'host 1 exits non-zero');
      t.comment(`host 1 ended ${end.at - killedAt} ms after the kill`);
      namesHost(t, procs[1], 0, net.addresses[0], 'host 1');
    },
  );

  t.test(
    'the link cut: both hosts end by themselves after the peer wait (2 × --stall-timeout-ms), non-zero, naming each ' +
      'other',
    CASE,
    async t => {
      const net = pairFor(t);
      const stepping = firstLine(/^\{"event":"step","step":3\b/);
      const procs = hosts(net, ['--steps', String(MANY_STEPS)], (r, l) => {
        if (r === 1) stepping.onLine(l);
      });
      await stepSeen(procs, stepping.seen, 1);
      const cutAt = Date.now();
      net.setLink(false);
      const ends = await Promise.all(procs.map(p => p.ended));
      for (const r of [0, 1] as const) {
        const peer: Rank = r === 0 ? 1 : 0;
        t.not(
          ends[r].code,
          0,
          `host ${r} exits non-zero (${ends[r].at - cutAt} ms after the cut; peer wait ${PEER_WAIT_MS} ms)`,
        );
        t.equal(ends[r].signal, null, `host ${r} ended by itself (no signal), ${ends[r].at - cutAt} ms after the cut`);
        namesHost(t, procs[r], peer, net.addresses[peer], `host ${r}`);
      }
    },
  );

  t.test(
    'host 1 frozen (SIGSTOP) for good: host 0 ends after the peer wait naming it; host 1, let go, ends by itself',
    CASE,
    async t => {
      const net = pairFor(t);
      const stepping = firstLine(/^\{"event":"step","step":3\b/);
      const procs = hosts(net, ['--steps', String(MANY_STEPS)], (r, l) => {
        if (r === 1) stepping.onLine(l);
      });
      await stepSeen(procs, stepping.seen, 1);
      const frozenAt = Date.now();
      procs[1].child.kill('SIGSTOP');
      const end0 = await procs[0].ended;
      t.not(
        end0.code,
        0,
        `host 0 exits non-zero, ${end0.at - frozenAt} ms after host 1 froze (peer wait ${PEER_WAIT_MS} ms)`,
      );
      namesHost(t, procs[0], 1, net.addresses[1], 'host 0');
      procs[1].child.kill('SIGCONT');
      const end1 = await procs[1].ended;
      t.not(end1.code, 0, `host 1 ends by itself, non-zero, once let go: ${procs[1].stderr.join(' | ')}`);
    },
  );

  t.test(
    '2 hosts in 2 namespaces train to the parameters of one process with --devices 2, host 1 frozen on the way for ' +
      'a while ' +
      '(longer than the stall timeout, shorter than the peer wait): not taken for dead',
    CASE,
    async t => {
      const net = pairFor(t);
      const dir = tempDir(t);
      const frozenMs = Math.round(1.5 * STALL_MS);
      let thawed: Promise<void> | undefined;
      const procs = hosts(net, ['--steps', String(STEPS), '--out', path.join(dir, 'hosts')], (r, l) => {
        if (r !== 1 || thawed || !l.startsWith('{"event":"step","step":3,')) return;
        procs[1].child.kill('SIGSTOP');
        thawed = new Promise(resolve =>
          setTimeout(() => {
            procs[1].child.kill('SIGCONT');
            resolve();
          }, frozenMs),
        );
      });
      const [e0, e1] = await Promise.all([procs[0].ended, procs[1].ended]);
      const ref = await referenceRun(t); // after the hosts, alone: the machine may be small
      t.ok(thawed, `host 1 was frozen for ${frozenMs} ms at step 3`);
      t.equal(e0.code, 0, `host 0 finishes: ${procs[0].stderr.join('\n')}`);
      t.equal(e1.code, 0, `host 1 finishes: ${procs[1].stderr.join('\n')}`);
      [0, 1].forEach(r =>
        t.equal(
          summaryOf(procs[r].lines).replicaChecksum,
          ref.checksum,
          `host ${r}'s replica = the one-process replica`,
        ),
      );
      t.ok(readFileSync(path.join(dir, 'hosts', 'weights.bin')).equals(ref.weights), 'weights.bin bit-identical');
    },
  );

  t.test(
    "host 1 killed with SIGKILL: host 0 exits non-zero, naming it, its address and the step; host 0's last " +
      'checkpoint is intact and resuming from it equals an uninterrupted run',
    CASE,
    async t => {
      const net = pairFor(t);
      const dir = tempDir(t);
      const ckpts = path.join(dir, 'run');
      const checkpointed = firstLine(/^\{"event":"checkpoint",.*"step":4,/);
      const run = hosts(net, ['--steps', String(MANY_STEPS), '--checkpoint-every', '2', '--out', ckpts], (r, l) => {
        if (r === 0) checkpointed.onLine(l);
      });
      await stepSeen(run, checkpointed.seen, 0);
      const killedAt = Date.now();
      run[1].child.kill('SIGKILL');
      const end = await run[0].ended;
      t.not(end.code, 0, 'host 0 exits non-zero');
      t.comment(`host 0 ended ${end.at - killedAt} ms after the kill`);
      namesHost(t, run[0], 1, net.addresses[1], 'host 0');
      const last = Math.max(...(await checkpointSteps(ckpts)));
      t.ok(last >= 4, `the last checkpoint is of step ${last}`);

      const steps = last + 3;
      const resumed = hosts(net, ['--steps', String(steps), '--resume', ckpts, '--out', path.join(dir, 'resumed')]);
      const [r0, r1] = await Promise.all(resumed.map(p => p.ended));
      t.equal(r0.code, 0, `resumed host 0: ${resumed[0].stderr.join('\n')}`);
      t.equal(r1.code, 0, `resumed host 1: ${resumed[1].stderr.join('\n')}`);
      t.ok(
        resumed[1].lines.some(l => l.startsWith('{"event":"started"') && l.includes(`"firstStep":${last + 1}`)),
        `resumed at step ${last + 1}`,
      );
      await oneProcess(t, steps, path.join(dir, 'whole'));
      const bits = (run: string) => readFileSync(path.join(dir, run, 'weights.bin'));
      t.ok(
        bits('resumed').equals(bits('whole')),
        `weights.bin of the resumed run (${last} + 3 steps) equals the uninterrupted run's, byte for byte`,
      );
    },
  );
}
