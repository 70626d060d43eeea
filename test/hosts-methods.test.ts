// local-head and partial-fc across hosts, real processes and sockets on 127.0.0.1: `tandem launch --hosts 2 --devices
// 1`
// (and partial-fc 2 × 2, over the default transport of one machine, shm, and over the hierarchical one) trains to the
// bits of one process with `--devices 2` (4) — the extractor (`weights.bin`), the full classifier assembled on
// host 0 from every host's head (`classifier/weights.bin`), the held-out accuracies — and every host's replica has the
// same
// checksum. 5 classes over 2 devices: shares of 3 and 2 labels (the heads' gather pads the smaller one). Every process
// is torn down.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { loadShmAddon } from '../src/collectives/shm/shm-addon.js';

const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const TRAIN = [
  '--model',
  'mlp',
  '--data',
  'synthetic-images',
  '--image-size',
  '8x8x1',
  '--classes',
  '5',
  '--dataset-size',
  '90',
  '--batch',
  '8',
  '--seed',
  '3',
  '--steps',
  '4',
  '--embedding',
  '8',
  '--export-classifier',
  '--json',
];

interface Ended {
  code: number | null;
  lines: string[];
  stderr: string[];
}
interface Summary {
  replicaChecksum: string;
  config: { devices: number; out?: string; transport: string };
  classifier: {
    classifierPath?: string;
    localClasses: number[];
    heldOut?: { centreAccuracy?: number; classifierAccuracy?: number };
  };
}

const live = new Set<ChildProcess>();
t.teardown(() => {
  for (const c of live) c.kill('SIGKILL');
});

/** `tandem ARGS` to its end, stdout and stderr lines kept. */
async function tandem(args: string[]): Promise<Ended> {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  const lines: string[] = [],
    stderr: string[] = [];
  readline.createInterface({ input: child.stdout! }).on('line', l => lines.push(l));
  readline.createInterface({ input: child.stderr! }).on('line', l => stderr.push(l));
  const [code] = await once(child, 'close');
  live.delete(child);
  return { code: code as number | null, lines, stderr };
}

/** The `summary` JSON line of `lines`, with a `[host r] ` prefix stripped when given. */
function summaryOf(lines: string[], prefix = ''): Summary {
  const line = lines.find(l => l.startsWith(`${prefix}{"event":"summary"`));
  if (!line) throw new Error(`no summary in:\n${lines.join('\n')}`);
  return JSON.parse(line.slice(prefix.length));
}

/**
 * One process of `method` with --devices N, its outputs in METHOD-N/ of a directory kept for the file: run once and
 * shared by the cases of the same method and device count (the default and the forced transport: the same bits to
 * match; the suite's time).
 */
const oneDir = mkdtempSync(path.join(tmpdir(), 'tandem-hosts-methods-one-'));
t.teardown(() => rmSync(oneDir, { recursive: true, force: true }));
const oneRuns = new Map<string, Promise<Ended>>();
function oneProcess(method: string, devices: number): Promise<Ended> {
  const key = `${method}-${devices}`;
  let run = oneRuns.get(key);
  if (!run) {
    run = tandem([
      'train',
      '--devices',
      String(devices),
      '--method',
      method,
      ...TRAIN,
      '--out',
      path.join(oneDir, key),
    ]);
    oneRuns.set(key, run);
  }
  return run;
}

if (glooAddonOrSkip()) {
  // partial-fc 2 x 2: its compute collectives (all-gather, blocking max and sum all-reduces) on shm and on the
  // hierarchical transport.
  const defaultTransport = (devices: number) => (loadShmAddon().loaded ? 'shm' : devices > 1 ? 'hierarchical' : 'gloo');
  for (const [method, devices, forced] of [
    ['local-head', 1],
    ['partial-fc', 1],
    ['partial-fc', 2],
    ['partial-fc', 2, 'hierarchical'],
  ] as const) {
    const transport = forced ?? defaultTransport(devices);
    t.test(
      `${method}: launch --hosts 2 --devices ${devices}${forced ? ` --transport ${forced}` : ''} equals one process ` +
        `with --devices ${2 * devices}, ` +
        'bit for bit; heads reach host 0',
      async t => {
        const dir = mkdtempSync(path.join(tmpdir(), `tandem-hosts-${method}-`));
        t.teardown(() => rmSync(dir, { recursive: true, force: true }));
        const [h, o] = await Promise.all([
          tandem([
            'launch',
            '--hosts',
            '2',
            '--devices',
            String(devices),
            '--method',
            method,
            ...TRAIN,
            ...(forced ? ['--transport', forced] : []),
            '--out',
            path.join(dir, 'hosts'),
          ]),
          oneProcess(method, 2 * devices),
        ]);
        const oneOut = path.join(oneDir, `${method}-${2 * devices}`);
        t.equal(h.code, 0, `launch: ${h.stderr.join('\n')}`);
        t.equal(o.code, 0, `one process: ${o.stderr.join('\n')}`);
        const single = summaryOf(o.lines);
        const [host0, host1] = [0, 1].map(r => summaryOf(h.lines, `[host ${r}] `));
        const shares = devices === 1 ? [3, 2] : [2, 1, 1, 1];
        t.same(single.classifier.localClasses, shares, `labels shared ${shares.join(' + ')}`);
        t.equal(
          host0.config.transport,
          transport,
          forced ? 'the transport asked for' : 'the default transport of processes of one machine',
        );
        [host0, host1].forEach((s, r) =>
          t.equal(s.replicaChecksum, single.replicaChecksum, `host ${r}'s replica = the one-process replica`),
        );
        const same = (file: string) =>
          readFileSync(path.join(dir, 'hosts', file)).equals(readFileSync(path.join(oneOut, file)));
        t.ok(same('weights.bin'), 'extractor weights.bin bit-identical');
        t.ok(same(path.join('classifier', 'weights.bin')), "full classifier (every head, host 1's too) bit-identical");
        const placeless = (s: Summary) => ({ ...s.classifier, classifierPath: undefined });
        t.same(
          placeless(host0),
          placeless(single),
          "host 0's classifier summary (held-out accuracies too) = one process's",
        );
        t.same(host1.classifier.localClasses, shares, 'host 1 knows every head');
        t.equal(host1.classifier.heldOut, undefined, 'host 1 evaluates nothing');
        t.equal(host1.config.out, undefined, 'host 1 writes nothing');
      },
    );
  }
}
