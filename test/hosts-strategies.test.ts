// Every data-parallel strategy across hosts, real processes and sockets on 127.0.0.1: two-group, per-layer, buckets,
// per-layer
// with the priority exchange (chunked, the readiness agreed over Gloo),
// a user strategy (an object, through the library API: one process per host) and auto (host 0 profiles, every host runs
// its choice, the choice printed by host 0 alone) on 2 hosts × 1 device train to the bits of one process with
// `--devices 2` and sequential (every strategy equals sequential bit for bit: strategies.test.ts; sequential across
// hosts: hosts.test.ts). And sync BatchNormalization across hosts (its statistics all-reduced over Gloo inside forward
// and backward): a BN convnet on 2 hosts × 1 = one process with `--devices 2`, bit for bit, moving statistics included.
// The launches wait for each exchange group inside forward (forwardWait 'group', the default), the one-process
// references for the whole update before forward (`--forward-wait step`). At most 3 runs at once (a launch is 3
// processes). Every process is torn down.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { freePort } from '../src/world/launch.js';
import { withFlags } from './fixtures/flag-args.js';
import { smallRunArgs } from './fixtures/small-run.js';

const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const CUSTOM_HOST = fileURLToPath(new URL('./fixtures/custom-strategy-host.js', import.meta.url));
const BN_CONVNET = fileURLToPath(new URL('../../test/fixtures/models/bn-convnet.mjs', import.meta.url));
const STEPS = '4';
/** The same run as custom-strategy-host.ts's. */
// --verbose: host 1 prints its events too
const TRAIN = [...smallRunArgs({ seed: 3, steps: STEPS }), '--json', '--verbose'];
const LAUNCH = ['launch', '--hosts', '2', '--devices', '1'];
const AT_ONCE = 3;

interface Ended {
  code: number | null;
  lines: string[];
}

const live = new Set<ChildProcess>();
t.teardown(() => {
  for (const c of live) c.kill('SIGKILL');
});

/** `node SCRIPT ARGS` to its end, stdout and stderr lines kept. */
async function node(script: string, args: string[]): Promise<Ended> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  const lines: string[] = [];
  for (const stream of [child.stdout!, child.stderr!])
    readline.createInterface({ input: stream }).on('line', l => lines.push(l));
  const [code] = await once(child, 'close');
  live.delete(child);
  return { code: code as number | null, lines };
}

/** The runs, at most AT_ONCE at a time, in order. */
async function pooled<T>(jobs: (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const i = next++;
      results[i] = await jobs[i]();
    }
  };
  await Promise.all(Array.from({ length: AT_ONCE }, worker));
  return results;
}

/** The `summary` JSON line of `lines` (a `[host r] ` prefix stripped when given). */
function summaryOf(
  lines: string[],
  prefix = '',
): { replicaChecksum: string; strategy: { name: string; groups: unknown[] } } {
  const line = lines.find(l => l.startsWith(`${prefix}{"event":"summary"`));
  if (!line) throw new Error(`no summary in:\n${lines.join('\n')}`);
  return JSON.parse(line.slice(prefix.length));
}

if (glooAddonOrSkip()) {
  t.test(
    'two-group, per-layer, buckets, a user strategy, auto, priority exchange and sync BatchNormalization: 2 hosts × ' +
      '1 = one process × 2, bit for bit',
    async t => {
      const dir = mkdtempSync(path.join(tmpdir(), 'tandem-hosts-strategies-'));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const out = (run: string) => path.join(dir, run);
      const rendezvous = `127.0.0.1:${await freePort()}`;
      const custom = async (): Promise<Ended> => {
        const [h0, h1] = await Promise.all([
          node(CUSTOM_HOST, ['0', rendezvous, STEPS, out('custom')]),
          node(CUSTOM_HOST, ['1', rendezvous, STEPS]),
        ]);
        return {
          code: h0.code || h1.code,
          lines: [...h0.lines.map(l => `[host 0] ${l}`), ...h1.lines.map(l => `[host 1] ${l}`)],
        };
      };
      const bnArgs = withFlags(TRAIN, ['--model', BN_CONVNET, '--batch-norm', 'sync']);
      const runs: Record<string, () => Promise<Ended>> = {
        // The references wait for the whole update before forward; the launches wait per group inside forward (the
        // default).
        reference: () =>
          node(CLI, [
            'train',
            '--devices',
            '2',
            ...TRAIN,
            '--strategy',
            'sequential',
            '--forward-wait',
            'step',
            '--out',
            out('reference'),
          ]),
        'two-group': () => node(CLI, [...LAUNCH, ...TRAIN, '--strategy', 'two-group', '--out', out('two-group')]),
        'per-layer': () => node(CLI, [...LAUNCH, ...TRAIN, '--strategy', 'per-layer', '--out', out('per-layer')]),
        buckets: () =>
          node(CLI, [
            ...LAUNCH,
            ...TRAIN,
            '--strategy',
            'buckets',
            '--bucket-mb',
            '0.004',
            '--first-bucket-mb',
            '0.001',
            '--out',
            out('buckets'),
          ]),
        auto: () => node(CLI, [...LAUNCH, ...TRAIN, '--strategy', 'auto', '--out', out('auto')]),
        // Priority exchange: chunks of 997 floats (the output layer's group is smaller than one), agreed over Gloo.
        priority: () =>
          node(CLI, [
            ...LAUNCH,
            ...TRAIN,
            '--strategy',
            'per-layer',
            '--exchange-order',
            'priority',
            '--chunk-floats',
            '997',
            '--out',
            out('priority'),
          ]),
        custom,
        'bn reference': () =>
          node(CLI, ['train', '--devices', '2', ...bnArgs, '--forward-wait', 'step', '--out', out('bn reference')]),
        bn: () => node(CLI, [...LAUNCH, ...bnArgs, '--out', out('bn')]),
      };
      const names = Object.keys(runs);
      const ended = Object.fromEntries((await pooled(Object.values(runs))).map((e, i) => [names[i], e]));
      for (const name of names)
        t.equal(ended[name].code, 0, `${name} exits 0`) || t.comment(ended[name].lines.join('\n'));
      const bits = (run: string) => readFileSync(path.join(out(run), 'weights.bin'));
      const reference = summaryOf(ended.reference.lines).replicaChecksum;
      for (const name of ['two-group', 'per-layer', 'buckets', 'auto', 'priority']) {
        const [h0, h1] = [0, 1].map(r => summaryOf(ended[name].lines, `[host ${r}] `));
        // auto runs what the cost model predicts fastest (the simplest within 2%: on this tiny mlp, often sequential)
        if (name !== 'auto')
          t.ok(
            h0.strategy.groups.length > 1,
            `${name}: ${h0.strategy.groups.length} exchange groups (${h0.strategy.name})`,
          );
        t.equal(h1.strategy.name, h0.strategy.name, `${name}: both hosts ran ${h0.strategy.name}`);
        t.same(
          [h0.replicaChecksum, h1.replicaChecksum],
          [reference, reference],
          `${name}: both hosts' replicas = the one-process replica`,
        );
        t.ok(bits(name).equals(bits('reference')), `${name}: weights.bin bit-identical to one process's`);
      }
      const autoLines = ended.auto.lines.filter(l => l.includes('{"event":"auto"'));
      t.ok(
        autoLines.length > 0 && autoLines.every(l => l.startsWith('[host 0] ')),
        `auto: the choice is printed by host 0 alone (${autoLines.length} line(s))`,
      );
      const customHosts = [0, 1].map(
        r =>
          JSON.parse(ended.custom.lines.find(l => l.startsWith(`[host ${r}] {"replicaChecksum"`))!.slice(9)) as {
            replicaChecksum: string;
            groups: number;
          },
      );
      t.ok(customHosts[0].groups > 2, `user strategy: ${customHosts[0].groups} exchange groups`);
      t.same(
        customHosts.map(h => h.replicaChecksum),
        [reference, reference],
        "user strategy: both hosts' replicas = the one-process replica",
      );
      t.ok(bits('custom').equals(bits('reference')), "user strategy: weights.bin bit-identical to one process's");
      const bn = [0, 1].map(r => summaryOf(ended.bn.lines, `[host ${r}] `).replicaChecksum);
      t.same(
        bn,
        Array(2).fill(summaryOf(ended['bn reference'].lines).replicaChecksum),
        "sync BatchNormalization: both hosts' replicas = the one-process replica",
      );
      t.ok(
        bits('bn').equals(bits('bn reference')),
        "sync BatchNormalization: weights.bin (moving statistics too) bit-identical to one process's",
      );
    },
  );
}
