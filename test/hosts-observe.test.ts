// One view of a run of several hosts, on host 0, and the replica check, with real processes on 127.0.0.1:
// - `tandem launch --hosts 2 --devices 1 --json --trace F` (replicas checked every 2 steps) passes its checks; host 0's
//   step lines carry the world's loss and accuracy, equal at every step to one process with --devices 2 (training is
//   bit-identical); host 1 prints no progress; the trace has a process per host with spans of each host's device;
// - a replica that diverges (the `perturb` test fault: device 1 moved after step 3's update) ends both hosts with
//   REPLICA_DIVERGED at the check after step 4, naming host 1 device 1, before step 6 is trained;
// - one process: the same fault is caught at step 4, after the check of step 2 passed (the library API, the error's
// code).
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { freePort } from '../src/world/launch.js';
import { train, type TrainConfig } from '../src/index.js';
import { withFault } from './fixtures/fault-plugin.js';
import { smallRunArgs } from './fixtures/small-run.js';

const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const TRAIN = [...smallRunArgs({ seed: 3, strategy: 'sequential' }), '--json', '--replica-check-every', '2'];

interface Proc {
  child: ChildProcess;
  lines: string[];
  ended: Promise<number | null>;
}

const live = new Set<ChildProcess>();
t.teardown(() => {
  for (const c of live) c.kill('SIGKILL');
});

function tandem(args: string[]): Proc {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  const lines: string[] = [];
  readline.createInterface({ input: child.stdout! }).on('line', l => lines.push(l));
  readline.createInterface({ input: child.stderr! }).on('line', l => lines.push(l));
  const ended = once(child, 'close').then(([code]) => {
    live.delete(child);
    return code as number | null;
  });
  return { child, lines, ended };
}

type Json = Record<string, unknown> & { event: string };
/** The JSON lines of `lines` that start with `prefix` (stripped). */
function jsonLines(lines: string[], prefix = ''): Json[] {
  return lines.filter(l => l.startsWith(`${prefix}{`)).map(l => JSON.parse(l.slice(prefix.length)) as Json);
}

interface TraceEvent {
  ph: string;
  name: string;
  pid: number;
  tid: number;
  args?: { name?: string; device?: number };
}

if (glooAddonOrSkip()) {
  t.test(
    'launch --hosts 2: host 0 shows the world (loss = one process with --devices 2), host 1 no progress, one trace ' +
      'with a process per host',
    async t => {
      const dir = mkdtempSync(path.join(tmpdir(), 'tandem-observe-'));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const trace = path.join(dir, 'trace.json');
      const launch = tandem(['launch', '--hosts', '2', '--devices', '1', ...TRAIN, '--steps', '6', '--trace', trace]);
      const one = tandem(['train', '--devices', '2', ...TRAIN, '--steps', '6']);
      const [h, o] = await Promise.all([launch.ended, one.ended]);
      t.equal(h, 0, `launch (replica checks after steps 2 and 4 pass): ${launch.lines.join('\n')}`);
      t.equal(o, 0, `one process: ${one.lines.join('\n')}`);
      const world = jsonLines(launch.lines, '[host 0] ').filter(l => l.event === 'step');
      const single = jsonLines(one.lines).filter(l => l.event === 'step');
      t.equal(world.length, 6, 'host 0 shows every step');
      t.same(
        world.map(l => [l.step, l.loss, l.accuracy]),
        single.map(l => [l.step, l.loss, l.accuracy]),
        'world loss and accuracy = one process, bit for bit',
      );
      t.ok(
        world.every(l => (l.computeMs as number[]).length === 2),
        'per-device compute times of both hosts',
      );
      t.ok(
        jsonLines(launch.lines, '[host 0] ')
          .filter(l => l.event !== 'step' && l.event !== 'summary')
          .every(l => l.host === 0),
        "host 0's events carry host 0",
      );
      const host1 = jsonLines(launch.lines, '[host 1] ');
      t.same(
        host1.map(l => l.event),
        ['summary'],
        `host 1 prints only its summary: ${host1.map(l => l.event).join(', ')}`,
      );
      const events = (JSON.parse(readFileSync(trace, 'utf8')) as { traceEvents: TraceEvent[] }).traceEvents;
      const processes = events.filter(e => e.ph === 'M' && e.name === 'process_name').map(e => [e.pid, e.args?.name]);
      t.same(
        processes,
        [
          [0, 'host 0'],
          [1, 'host 1'],
        ],
        'a process per host',
      );
      for (const host of [0, 1]) {
        const spans = events.filter(e => e.ph === 'X' && e.pid === host);
        t.ok(
          spans.some(e => e.name.startsWith('forward')) && spans.some(e => e.name.startsWith('exchange')),
          `forward and exchange spans of host ${host}`,
        );
        t.ok(
          spans.every(e => e.args?.device === host),
          `host ${host}'s spans are its device ${host}'s`,
        );
        const threads = events
          .filter(e => e.ph === 'M' && e.name === 'thread_name' && e.pid === host)
          .map(e => e.args?.name)
          .sort();
        t.same(
          threads,
          [`device ${host} comm`, `device ${host} compute`],
          `host ${host}: a thread per device and side`,
        );
      }
    },
  );

  t.test('a replica that diverges on host 1 ends both hosts with REPLICA_DIVERGED at the next check', async t => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tandem-diverge-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const fault = path.join(dir, 'fault.json');
    writeFileSync(fault, JSON.stringify({ ...withFault({ device: 1, step: 3, phase: 'update', kind: 'perturb' }) }));
    const rendezvous = `127.0.0.1:${await freePort()}`;
    const hosts = [0, 1].map(r =>
      tandem([
        'train',
        '--hosts',
        '2',
        '--host-rank',
        String(r),
        '--rendezvous',
        rendezvous,
        '--devices',
        '1',
        ...TRAIN,
        '--steps',
        '1000',
        '--config',
        fault,
      ]),
    );
    const codes = await Promise.all(hosts.map(h => h.ended));
    for (const [r, h] of hosts.entries()) {
      t.not(codes[r], 0, `host ${r} exits non-zero`);
      const failed = jsonLines(h.lines).find(l => l.event === 'failed');
      t.equal(failed?.code, 'REPLICA_DIVERGED', `host ${r}: ${h.lines.slice(-3).join(' | ')}`);
      t.match(
        String(failed?.message),
        /differ after step 4: host 1 device 1 \([0-9a-f]{16}\) against host 0 device 0 \([0-9a-f]{16}\)/,
        `host ${r} names step, host, device, digests`,
      );
    }
    const steps = jsonLines(hosts[0].lines)
      .filter(l => l.event === 'step')
      .map(l => l.step as number);
    t.ok(
      Math.max(...steps) <= 5,
      `host 0 stopped within the check interval after the fault (last step ${Math.max(...steps)})`,
    );
    t.ok(
      jsonLines(hosts[0].lines).some(
        l => l.event === 'warning' && l.host === 1 && /host 1 failed \(REPLICA_DIVERGED\)/.test(String(l.message)),
      ),
      "host 0 shows host 1's failure as a warning",
    );
  });
}

// The check after step 2 compares two identical replicas and passes; the one after step 4 fails.
t.test('one process: a diverged device is caught at the next check, naming it', async t => {
  const config: TrainConfig = {
    model: 'mlp',
    data: 'synthetic-images',
    imageSize: [8, 8, 1],
    classes: 4,
    datasetSize: 64,
    batch: 8,
    seed: 3,
    devices: 2,
    strategy: 'sequential',
    steps: 20,
    replicaCheckEvery: 2,
  };
  await t.rejects(
    train({ ...config, ...withFault({ device: 1, step: 3, phase: 'update', kind: 'perturb' }) }),
    { code: 'REPLICA_DIVERGED', message: /differ after step 4: device 1 \([0-9a-f]{16}\) against device 0/ },
    'step 2 passed, step 4 names device 1',
  );
});
