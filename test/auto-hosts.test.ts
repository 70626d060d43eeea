// --strategy auto across 2 hosts (real processes, Gloo over 127.0.0.1): every host times all-reduces over the host link
// at start, host 0 profiles and picks (printing the link's α, β and the candidates' predictions), and every host runs
// host 0's choice — strategy, forward wait, exchange order, chunk and comm hook (--comm-hook auto allows one) — to the
// same replica. Both hosts run on this machine: each counts 2 hosts sharing its cores (the CPU ceiling's divisor), and
// the link probe measured the CPU an all-reduce costs, and the calibration the spread of its steps (lockstep.ts).
import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { TIE } from '../src/profiling/auto-candidates.js';
import { smallRunArgs } from './fixtures/small-run.js';

const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));

interface AutoSummary {
  strategy: string;
  forwardWait: string;
  exchangeOrder: string;
  chunkFloats?: number;
  commHook?: string;
  predictedMs: number;
  reason: string;
  link?: {
    alphaMs: number;
    bitsPerSecond: number;
    source: string;
    samples?: { bytes: number; ms: number; cpuMs?: number }[];
    cpuAlphaMs?: number;
  };
  cpu?: { machineCores: number; hostsOnMachine: number; cpuMsPerStep?: number; bound: boolean };
  candidates: { key: string; predictedMs: number; cpuMsPerStep?: number }[];
}

if (glooAddonOrSkip()) {
  t.test(
    '--strategy auto --comm-hook auto on 2 hosts: the link measured, host 0 decides, both hosts run its choice',
    async t => {
      const dir = mkdtempSync(path.join(tmpdir(), 'tandem-auto-hosts-'));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const child = spawn(
        process.execPath,
        [
          CLI,
          'launch',
          '--hosts',
          '2',
          '--devices',
          '1',
          ...smallRunArgs({ steps: 3 }),
          '--strategy',
          'auto',
          '--comm-hook',
          'auto',
          '--json',
          '--verbose',
          '--out',
          path.join(dir, 'out'),
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      t.teardown(() => {
        if (child.exitCode === null) child.kill('SIGKILL');
      });
      const lines: string[] = [];
      for (const s of [child.stdout!, child.stderr!])
        readline.createInterface({ input: s }).on('line', l => lines.push(l));
      const [code] = await once(child, 'close');
      t.equal(code, 0, 'the launch exits 0') || t.comment(lines.join('\n'));
      const json = (host: number, event: string) =>
        lines.filter(l => l.startsWith(`[host ${host}] {"event":"${event}"`)).map(l => JSON.parse(l.slice(9)));
      const [auto] = json(0, 'auto') as AutoSummary[];
      t.ok(auto, 'host 0 prints the auto event');
      t.same(json(1, 'auto'), [], 'host 1 prints no auto event of its own');
      t.equal(auto.link?.source, 'measured', 'the link was measured');
      t.ok(
        auto.link!.alphaMs >= 0 && auto.link!.bitsPerSecond > 0 && auto.link!.samples!.length >= 2,
        `α ${auto.link!.alphaMs.toFixed(3)} ms, β ${(auto.link!.bitsPerSecond / 1e9).toFixed(2)} Gbit/s from ` +
          `${auto.link!.samples!.length} sizes`,
      );
      t.ok(
        auto.candidates.length > 4 && auto.reason.includes('top:') && auto.reason.includes('α '),
        `the reason names the link and the top candidates: ${auto.reason.slice(0, 160)}…`,
      );
      t.ok(
        auto.predictedMs <= auto.candidates[0].predictedMs * (1 + TIE),
        `the pick (${auto.predictedMs.toFixed(2)} ms) is within ${TIE * 100}% of the fastest ` +
          `(${auto.candidates[0].predictedMs.toFixed(2)} ms)`,
      );
      t.equal(auto.cpu?.hostsOnMachine, 2, 'host 0 counts 2 hosts on its machine (the same boot id)');
      t.equal(auto.cpu?.machineCores, availableParallelism(), "on this machine's cores");
      t.match(auto.reason, /CPU per step on \d+ cores? shared by 2 hosts/, 'the reason says the cores are shared');
      t.match(
        auto.reason,
        /hosts in lockstep: \+\d+\.\d ms a step for the slowest of 2 \(the calibration's steps spread by \d+\.\d ms\)/,
        "the reason counts the wait for the slower host, from the calibration's step spread",
      );
      t.ok(
        auto.link!.samples!.every(s => (s.cpuMs ?? -1) >= 0) && auto.link!.cpuAlphaMs! >= 0,
        `the probe measured each size's CPU: ${auto.link!.samples!.map(s => s.cpuMs!.toFixed(2)).join(', ')} ms`,
      );
      t.ok(
        auto.candidates.every(
          c => c.cpuMsPerStep! > 0 && c.predictedMs >= c.cpuMsPerStep! / (auto.cpu!.machineCores / 2) - 1e-9,
        ),
        "every prediction is at least its CPU per step over this host's share of the cores",
      );
      const summaries = [0, 1].map(
        h =>
          json(h, 'summary')[0] as {
            replicaChecksum: string;
            strategy: { name: string };
            auto: AutoSummary;
            config: { forwardWait: string; commHook?: { name: string } };
          },
      );
      const pick = (a: AutoSummary) => ({
        strategy: a.strategy,
        forwardWait: a.forwardWait,
        exchangeOrder: a.exchangeOrder,
        chunkFloats: a.chunkFloats,
        commHook: a.commHook,
      });
      t.same(
        pick(summaries[1].auto),
        pick(summaries[0].auto),
        `both hosts ran the same choice: ${JSON.stringify(pick(summaries[0].auto))}`,
      );
      t.same(pick(summaries[0].auto), pick(auto), 'the choice printed is the one run');
      t.match(summaries[1].auto.reason, /^host 0 chose: /, 'host 1 says host 0 chose');
      t.same(
        summaries.map(s => s.strategy.name),
        [auto.strategy, auto.strategy],
        'both hosts trained with the chosen strategy',
      );
      t.same(
        summaries.map(s => s.config.forwardWait),
        [auto.forwardWait, auto.forwardWait],
        'and its forward wait',
      );
      t.same(
        summaries.map(s => s.config.commHook?.name),
        [auto.commHook, auto.commHook],
        'and its comm hook',
      );
      t.equal(summaries[0].auto.cpu?.hostsOnMachine, 2, 'the summary keeps the hosts sharing the machine');
      t.equal(summaries[1].replicaChecksum, summaries[0].replicaChecksum, 'the same replica on both hosts');
    },
  );
}
