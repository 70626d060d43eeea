// Method A across 2 hosts on a REAL shaped link (not the emulated --link): two network namespaces joined by a veth
// pair whose ends' egress is shaped with tc tbf at 100 Mbit/s (bench/network-namespaces.ts), alexnet-mini, two-group
// with per-group forward waits and the priority exchange. From host 0's Chrome trace (every host's spans), on each
// host's device and every step s after the first:
// - the small conv group, ready last, overtakes the large FC group in flight: its exchange starts after the FC
//   group's first chunk started and ends before the FC group's last chunk ends;
// - the next step's first conv forward starts before step s's FC exchange has ended: its wait for the conv group
//   ends, and a forward span of step s + 1 starts, while the FC group's chunks still cross the link (on at least a
//   third of the steps: timing on a loaded machine, below).
// Bits against sequential across hosts: hosts-strategies.test.ts. Needs root and iproute2 (skipped saying why
// otherwise). Every process and the namespaces are torn down.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { glooAddonOrSkip } from './fixtures/gloo-addon-or-skip.js';
import { killAllTandems, tandem, type TandemProcess } from './fixtures/tandem-lines.js';
import { makeHostPair, namespaceSupport } from '../bench/network-namespaces.js';
import { spansFromChromeTrace } from '../src/monitor/timeline-picture.js';
import type { Span } from '../src/monitor/span.js';

const STEPS = 8;
// 640 samples: 10 steps an epoch, so no epoch ends inside the run (its end is a point where the hosts meet).
const TRAIN = [
  '--model',
  'alexnet-mini',
  '--data',
  'synthetic-images',
  '--dataset-size',
  '640',
  '--classes',
  '10',
  '--batch',
  '32',
  '--steps',
  String(STEPS),
  '--strategy',
  'two-group',
  '--forward-wait',
  'group',
  '--exchange-order',
  'priority',
  '--chunk-floats',
  '131072',
  '--optimizer',
  'sgd',
  '--json',
];

const support = namespaceSupport();
if (!support.ok) t.comment(`skipped: ${support.reason}`);
else if (glooAddonOrSkip()) {
  t.test(
    '100 Mbit/s shaped link: the conv group overtakes the FC group, and the next conv forward starts under the FC ' +
      'exchange',
    { timeout: 120_000 },
    async t => {
      const net = makeHostPair();
      t.teardown(() => net.close());
      t.teardown(killAllTandems);
      const dir = mkdtempSync(path.join(tmpdir(), 'tandem-shaped-'));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      net.shape('100mbit');
      const trace = path.join(dir, 'trace.json');
      const host = (rank: 0 | 1): TandemProcess =>
        tandem(
          [
            'train',
            '--hosts',
            '2',
            '--host-rank',
            String(rank),
            '--rendezvous',
            `${net.addresses[0]}:29510`,
            '--devices',
            '1',
            ...TRAIN,
            ...(rank === 0 ? ['--trace', trace] : []),
          ],
          () => {},
          (command, argv) => net.spawn(rank, command, argv, { stdio: ['ignore', 'pipe', 'pipe'] }),
        );
      const procs = [host(0), host(1)];
      const ends = await Promise.all(procs.map(p => p.ended));
      ends.forEach((e, h) => t.equal(e.code, 0, `host ${h} exits 0`) || t.comment(procs[h].stderr.join('\n')));
      const spans = spansFromChromeTrace(JSON.parse(readFileSync(trace, 'utf8')));
      const devices = [...new Set(spans.map(s => s.device))];
      t.equal(devices.length, 2, "the trace holds both hosts' devices");
      for (const device of devices) {
        const early: boolean[] = [];
        for (let step = 2; step < STEPS; step++)
          early.push(
            checkStep(
              t,
              spans.filter(s => s.device === device),
              device,
              step,
            ),
          );
        // At least a third: on a loaded machine (CI's tap runs test files side by side) a step's forward sometimes
        // waits until ~1 ms after the exchange ends, on up to 4 of 6 steps seen (alone: 4-6 of 6 early, 5 runs). The
        // overtaking above is checked on every step; with the exchange in ready order it fails there.
        t.ok(
          early.filter(Boolean).length * 3 >= early.length,
          `device ${device}: the next conv forward started under the FC exchange on ${early.filter(Boolean).length} ` +
            `of ${early.length} steps (at least a third)`,
        );
      }
    },
  );
}

/** Checks the overtaking on `step`; whether step + 1's conv forward started before `step`'s FC exchange ended. */
function checkStep(t: Tap, spans: Span[], device: number, step: number): boolean {
  const of = (s: number, kind: Span['kind'], prefix: string, thread: Span['thread']) =>
    spans.filter(x => x.step === s && x.kind === kind && x.thread === thread && x.name.startsWith(prefix));
  const fc = of(step, 'exchange', 'exchange fc', 'comm'),
    conv = of(step, 'exchange', 'exchange conv', 'comm');
  const label = `device ${device}, step ${step}`;
  if (
    !t.ok(
      fc.length >= 2 && conv.length === 1,
      `${label}: the FC group crosses in chunks (${fc.length}), the conv group in one (${conv.length})`,
    )
  )
    return false;
  const fcStart = Math.min(...fc.map(s => s.start)),
    fcEnd = Math.max(...fc.map(s => s.end));
  t.ok(
    conv[0].start > fcStart && conv[0].end < fcEnd,
    `${label}: the conv exchange (${(conv[0].start - fcStart).toFixed(1)}..${(conv[0].end - fcStart).toFixed(1)} ` +
      `ms) runs inside the FC exchange (0..${(fcEnd - fcStart).toFixed(1)} ms)`,
  );
  // The conv layers' forward: after the wait for the conv group when there is one (none when the group was applied
  // before forward reached it), else the step's first forward piece.
  const convWait = of(step + 1, 'wait', 'wait conv', 'compute')[0];
  const nextForward = spans
    .filter(
      x =>
        x.step === step + 1 &&
        x.kind === 'forward' &&
        x.thread === 'compute' &&
        x.start >= (convWait?.end ?? -Infinity),
    )
    .sort((a, b) => a.start - b.start)[0];
  if (
    !t.ok(
      nextForward,
      `${label}: step ${step + 1} runs ` +
        `forward${convWait ? ' after its wait for the conv group' : ' (the conv group was already applied)'}`,
    )
  )
    return false;
  t.comment(
    `${label}: step ${step + 1}'s conv forward starts ${(fcEnd - nextForward.start).toFixed(1)} ms before step ` +
      `${step}'s FC exchange ends`,
  );
  return nextForward.start < fcEnd;
}

type Tap = Pick<typeof t, 'ok' | 'equal' | 'comment'>;
