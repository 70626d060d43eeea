// Several hosts on loopback, real processes and sockets on 127.0.0.1: `tandem launch --hosts 2 --devices 1` (and 2 × 2)
// trains to the bits of one process with `--devices 2` (and 4) — on the default transport of processes of one machine
// (shm, when its addon is built) and forced onto TCP loopback (`--transport gloo`, `hierarchical`) — (same global
// batch, data-parallel, sequential), every host's replica has
// the same checksum, host 0 alone writes outputs; a host killed with SIGKILL ends the other host (run directly, no
// launcher) and the launcher, non-zero, naming the lost host (and its address; the launcher adds the likely
// cause of a SIGKILL it did not send, the kernel's out-of-memory killer, and the fix). Every process is torn down.
import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { firstLine, killAllTandems, summaryOf, tandem } from './fixtures/tandem-lines.js';
import { freePort } from '../src/world/launch.js';
import { loadShmAddon } from '../src/collectives/shm/shm-addon.js';

const TRAIN = [
  '--model',
  'mlp',
  '--data',
  'synthetic-images',
  '--image-size',
  '8x8x1',
  '--classes',
  '4',
  '--dataset-size',
  '64',
  '--batch',
  '8',
  '--seed',
  '3',
  '--strategy',
  'sequential',
  '--json',
  '--verbose',
]; // --verbose: host 1 prints its steps too

t.teardown(killAllTandems);

/**
 * One process with --devices N, 6 steps, its outputs in one-N/ of a directory kept for the file: run once and shared by
 * the cases of N devices in all (the default and the forced transport: the same bits to match; the suite's time).
 */
const oneDir = mkdtempSync(path.join(tmpdir(), 'tandem-hosts-one-'));
t.teardown(() => rmSync(oneDir, { recursive: true, force: true }));
const oneRuns = new Map<number, Promise<{ code: number | null; lines: string[]; stderr: string[] }>>();
function oneProcess(devices: number) {
  let run = oneRuns.get(devices);
  if (!run) {
    const one = tandem([
      'train',
      '--devices',
      String(devices),
      ...TRAIN,
      '--steps',
      '6',
      '--out',
      path.join(oneDir, `one-${devices}`),
    ]);
    run = one.ended.then(e => ({ code: e.code, lines: one.lines, stderr: one.stderr }));
    oneRuns.set(devices, run);
  }
  return run;
}

if (glooAddonOrSkip()) {
  const defaultTransport = (devices: number) => (loadShmAddon().loaded ? 'shm' : devices > 1 ? 'hierarchical' : 'gloo');
  for (const [hosts, devices, forced] of [
    [2, 1],
    [2, 2],
    [2, 1, 'gloo'],
    [2, 2, 'hierarchical'],
  ] as const) {
    const transport = forced ?? defaultTransport(devices);
    t.test(
      `launch --hosts ${hosts} --devices ${devices}${forced ? ` --transport ${forced}` : ''} equals one process ` +
        `with --devices ${hosts * devices}, ` +
        'bit for bit; replicas identical across hosts',
      async t => {
        const dir = mkdtempSync(path.join(tmpdir(), 'tandem-hosts-'));
        t.teardown(() => rmSync(dir, { recursive: true, force: true }));
        const launch = tandem([
          'launch',
          '--hosts',
          String(hosts),
          '--devices',
          String(devices),
          ...TRAIN,
          ...(forced ? ['--transport', forced] : []),
          '--steps',
          '6',
          '--out',
          path.join(dir, 'hosts'),
        ]);
        const oneOut = path.join(oneDir, `one-${hosts * devices}`);
        const [h, o] = await Promise.all([launch.ended, oneProcess(hosts * devices)]);
        t.equal(h.code, 0, `launch: ${launch.stderr.join('\n')}`);
        t.equal(o.code, 0, `one process: ${o.stderr.join('\n')}`);
        const single = summaryOf(o.lines);
        const perHost = Array.from({ length: hosts }, (_, r) => summaryOf(launch.lines, `[host ${r}] `));
        t.equal(perHost[0].config.devices, hosts * devices, `the world is ${hosts} hosts × ${devices} device(s)`);
        t.equal(
          perHost[0].config.transport,
          transport,
          forced ? 'the transport asked for' : 'the default transport of processes of one machine',
        );
        perHost.forEach((s, r) =>
          t.equal(s.replicaChecksum, single.replicaChecksum, `host ${r}'s replica = the one-process replica`),
        );
        t.ok(
          readFileSync(path.join(dir, 'hosts', 'weights.bin')).equals(readFileSync(path.join(oneOut, 'weights.bin'))),
          'weights.bin bit-identical',
        );
        perHost.slice(1).forEach((s, r) => t.equal(s.config.out, undefined, `host ${r + 1} writes nothing`));
        t.same(
          readdirSync(path.join(dir, 'hosts')).sort(),
          readdirSync(oneOut).sort(),
          'host 0 writes what one process writes',
        );
      },
    );
  }

  // The optimizer's state (adagrad's accumulator from its initial value, adamax's iteration counter) on every host.
  for (const optimizer of [
    ['adagrad', '--initial-accumulator', '0.2'],
    ['adamax', '--decay', '0.1'],
  ]) {
    t.test(
      `--optimizer ${optimizer.join(' ')}: launch --hosts 2 --devices 1 equals one process with --devices 2, bit ` +
        `for bit`,
      async t => {
        const dir = mkdtempSync(path.join(tmpdir(), 'tandem-hosts-opt-'));
        t.teardown(() => rmSync(dir, { recursive: true, force: true }));
        const flags = [...TRAIN, '--optimizer', ...optimizer, '--lr', '0.05', '--steps', '4'];
        const launch = tandem(['launch', '--hosts', '2', '--devices', '1', ...flags, '--out', path.join(dir, 'hosts')]);
        const one = tandem(['train', '--devices', '2', ...flags, '--out', path.join(dir, 'one')]);
        const [h, o] = await Promise.all([launch.ended, one.ended]);
        t.equal(h.code, 0, `launch: ${launch.stderr.join('\n')}`);
        t.equal(o.code, 0, `one process: ${one.stderr.join('\n')}`);
        t.equal(summaryOf(launch.lines, '[host 0] ').config.optimizer.kind, optimizer[0]);
        t.ok(
          readFileSync(path.join(dir, 'hosts', 'weights.bin')).equals(
            readFileSync(path.join(dir, 'one', 'weights.bin')),
          ),
          'weights.bin bit-identical',
        );
      },
    );
  }

  t.test('host 1 killed with SIGKILL: host 0 (no launcher) exits non-zero, naming host 1', async t => {
    const rendezvous = `127.0.0.1:${await freePort()}`;
    const host = (rank: number, onLine?: (l: string) => void) =>
      tandem(
        [
          'train',
          '--hosts',
          '2',
          '--host-rank',
          String(rank),
          '--rendezvous',
          rendezvous,
          '--devices',
          '1',
          ...TRAIN,
          '--steps',
          '100000',
        ],
        onLine,
      );
    const stepping = firstLine(/"event":"step","step":3\b/);
    const h0 = host(0);
    const h1 = host(1, stepping.onLine);
    await Promise.race([
      stepping.seen,
      h1.ended.then(e => {
        throw new Error(`host 1 ended first (${e.code}): ${h1.stderr.join('\n')}`);
      }),
    ]);
    const killedAt = Date.now();
    h1.child.kill('SIGKILL');
    const end = await h0.ended;
    t.not(end.code, 0, 'host 0 exits non-zero');
    t.comment(`host 0 ended ${end.at - killedAt} ms after the kill`);
    t.match(
      h0.stderr.join('\n'),
      /peer rank 1 \(host 1, 127\.0\.0\.1\)/,
      `names the lost host: ${h0.stderr.join(' | ')}`,
    );
  });

  t.test('launch: a host killed with SIGKILL ends the launch, non-zero, naming it', async t => {
    const stepping = firstLine(/^\[host 1\] \{"event":"step","step":3\b/);
    const launch = tandem(['launch', '--hosts', '2', '--devices', '1', ...TRAIN, '--steps', '100000'], stepping.onLine);
    await Promise.race([
      stepping.seen,
      launch.ended.then(e => {
        throw new Error(`launch ended first (${e.code}): ${launch.stderr.join('\n')}`);
      }),
    ]);
    const pid = Number(/host 1: (\d+)/.exec(launch.stderr.join('\n'))?.[1]);
    t.ok(pid > 0, "the launcher names host 1's pid");
    const killedAt = Date.now();
    process.kill(pid, 'SIGKILL');
    const end = await launch.ended;
    t.not(end.code, 0, 'launch exits non-zero');
    t.comment(`launch ended ${end.at - killedAt} ms after the kill`);
    // Not a SIGKILL of the launcher's: the likely cause (the kernel's OOM killer, exit 137), where to look and the fix.
    t.match(
      launch.stderr.join('\n'),
      new RegExp(
        "failed: host 1 was killed by SIGKILL \\(not by tandem: the kernel's out-of-memory killer, or a user; " +
          (`check \`dmesg\` \\(or \`journalctl -k\`\\) for "Out of memory: Killed process ${pid}"; a smaller --batch ` +
            `or fewer --devices per process uses less memory\\)`),
      ),
    );
    t.equal(end.code, 137, 'exit 128 + SIGKILL');
  });
}
