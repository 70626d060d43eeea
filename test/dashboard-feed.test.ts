// The dashboard's parts without a browser: `--dashboard` alone, with a port, or before another flag; a bad port
// refused by the config check; the feed a late page gets keeps the first and last steps of a long run at half the
// points; a finished run's event log read as untrusted (lines of the wrong shape left out and counted). A run's files
// that are links to a device (/dev/zero) are refused or left out, never read. A step's exchange reports that arrive
// after the next step's metrics (they travel on the comm thread's port) are still in the step's published bytes.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';
import { resolveConfig } from '../src/index.js';
import { DashboardFeed, KEPT_STEPS, type DashboardMessage } from '../src/monitor/dashboard-feed.js';
import { finishedRunFeed } from '../src/cli/finished-run.js';
import { readTrace } from '../src/cli/trace-command.js';
import { withDashboard } from '../src/trainer/run-dashboard.js';
import type { Span } from '../src/monitor/span.js';
import type { StepMetrics, TrainSummary } from '../src/trainer/run-types.js';

const step = (n: number): DashboardMessage => ({
  kind: 'step',
  step: {
    ...{ step: n, loss: 1 / n, accuracy: 0.5, lr: 0.01, samplesPerSecond: 100, stepMs: 10, overlap: 0, dataWaitMs: 0 },
    ...{ computeMs: [5], exchangeMs: [1], exchangeBytes: [4], waitMs: [0], hosts: [0] },
  },
});

t.test('--dashboard [PORT]: the flag alone is true, a port is a number', async t => {
  t.equal(parseTrainArgs(['--dashboard']).config.dashboard, true, 'alone, last');
  t.same(parseTrainArgs(['--dashboard', '--devices', '2']).config, { dashboard: true, devices: 2 }, 'before a flag');
  t.equal(parseTrainArgs(['--dashboard', '8080']).config.dashboard, 8080, 'a port');
  t.equal(parseTrainArgs(['--dashboard=0']).config.dashboard, 0, '= form');
  t.throws(() => parseTrainArgs(['--dashboard', 'x8']), {
    code: 'BAD_CONFIG',
    message: /--dashboard must be a number/,
  });
  await t.rejects(resolveConfig({ dashboard: 70000 }), { code: 'BAD_CONFIG', message: /dashboard: must be a port/ });
  await t.rejects(resolveConfig({ dashboardHost: '' }), { code: 'BAD_CONFIG', message: /dashboardHost/ });
});

t.test('a long run: a late page gets the first and last steps, at most KEPT_STEPS of them', async t => {
  const feed = new DashboardFeed();
  feed.publish({ kind: 'config', title: 'x', config: {} });
  const seen: number[] = [];
  feed.subscribe(m => m.kind === 'step' && seen.push(m.step.step));
  const total = KEPT_STEPS * 2 + 5;
  for (let n = 1; n <= total; n++) feed.publish(step(n));
  t.equal(seen.length, total, 'a connected page got every step');
  const kept = feed.snapshot().flatMap(m => (m.kind === 'step' ? [m.step.step] : []));
  t.ok(kept.length <= KEPT_STEPS, `${kept.length} steps kept`);
  t.ok(kept.length > KEPT_STEPS / 2, 'at least half');
  t.equal(kept[0], 1, 'the first');
  t.equal(kept[kept.length - 1], total, 'the last');
  t.ok(
    kept.every((s, i) => i === 0 || s > kept[i - 1]),
    'in order',
  );
  t.equal(feed.snapshot()[0].kind, 'config', 'the configuration stays');
});

t.test("a finished run's event log is read as untrusted", async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-dashboard-feed-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(
    path.join(dir, 'summary.json'),
    JSON.stringify({ steps: 2, finalLoss: 0.5, finalAccuracy: 1, samplesPerSecond: 10, wallSeconds: 1, history: [] }),
  );
  const bad = { kind: 'step', step: { ...(step(3) as { step: object }).step, loss: '<img src=x>' } };
  const lines = [
    step(1),
    step(2),
    bad,
    { kind: 'nonsense' },
    '{not json',
    { kind: 'event', event: { type: 'warning' } },
  ];
  writeFileSync(
    path.join(dir, 'events.jsonl'),
    lines.map(l => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n',
  );
  const warnings: string[] = [];
  const feed = finishedRunFeed(dir, line => warnings.push(line));
  const kinds = feed.snapshot().map(m => (m.kind === 'step' ? `step ${m.step.step}` : m.kind));
  t.same(kinds, ['config', 'step 1', 'step 2', 'event', 'summary', 'end'], 'the well-formed lines, then the summary');
  t.match(warnings, [/3 of 6 lines of .*events\.jsonl are not dashboard messages: left out/]);
  t.throws(() => finishedRunFeed(path.join(dir, 'none'), () => {}), {
    code: 'BAD_CONFIG',
    message: /cannot read the summary of a finished run/,
  });
});

t.test("a finished run's files that are links to a device are refused or left out, never read", async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-dashboard-devices-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  symlinkSync('/dev/zero', path.join(dir, 'summary.json'));
  t.throws(() => finishedRunFeed(dir, () => {}), {
    code: 'BAD_CONFIG',
    message: /cannot read the summary of a finished run .*summary\.json: it is not a regular file/,
  });
  rmSync(path.join(dir, 'summary.json'));
  writeFileSync(path.join(dir, 'summary.json'), JSON.stringify({ steps: 1, history: [{ step: 1, loss: 2 }] }));
  symlinkSync('/dev/zero', path.join(dir, 'events.jsonl'));
  const warnings: string[] = [];
  const kinds = finishedRunFeed(dir, line => warnings.push(line))
    .snapshot()
    .map(m => m.kind);
  t.same(kinds, ['config', 'step', 'summary', 'end'], "the summary's loss history instead");
  t.match(warnings, [/the event log .*events\.jsonl cannot be read \(it is not a regular file .*\): the loss history/]);
  t.throws(() => readTrace('/dev/zero'), {
    code: 'BAD_CONFIG',
    message: 'tandem trace /dev/zero: cannot read it: it is not a regular file (a device, FIFO or socket)',
  });
});

t.test("a step's exchange reports that come after the next step's metrics are in its published step", async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-dashboard-late-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const board = await withDashboard({ devices: 2 }, dir, {});
  const metrics = (n: number): StepMetrics => ({
    ...{ step: n, loss: 1 / n, accuracy: 0.5, lr: 0.01, samplesPerSecond: 100, stepMs: 10, dataWaitMs: 0 },
    ...{ computeMs: [5, 5], numTensors: [1, 1] },
  });
  const span = (device: number, kind: Span['kind'], step: number, bytes?: number): Span => {
    const at = { device, thread: 'comm' as const, kind, name: `${kind} all`, step, group: 0, start: 0, end: 1 };
    return bytes === undefined ? at : { ...at, bytes };
  };
  const report = (device: number, step: number) => [span(device, 'exchange', step, 40), span(device, 'apply', step)];
  const { onStep, onSpans, onEvent } = board.hooks;
  const started = { devices: 2, backend: 'cpu', method: 'data-parallel', strategy: 'x', steps: 9, firstStep: 1 };
  onEvent!({ type: 'started', ...started, stepsPerEpoch: 9, precision: 'fp32' });
  onSpans!(report(1, 1));
  onStep!(metrics(1));
  onStep!(metrics(2)); // device 0's report of step 1 is still on its way
  onSpans!(report(0, 1));
  onSpans!([...report(0, 2), ...report(1, 2)]);
  onStep!(metrics(3));
  for (let n = 4; n <= 9; n++) onStep!(metrics(n)); // no report: a step is held until 4 later ones are
  board.finish({ steps: 9, finalLoss: 0.1, finalAccuracy: 0.5, samplesPerSecond: 1, wallSeconds: 1 } as TrainSummary);
  await board.close();
  const logged = readFileSync(path.join(dir, 'events.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map(l => JSON.parse(l) as DashboardMessage)
    .flatMap(m => (m.kind === 'step' ? [[m.step.step, m.step.exchangeBytes.join()]] : []));
  t.same(
    logged,
    [1, 2, 3, 4, 5, 6, 7, 8, 9].map(n => [n, n <= 2 ? '40,40' : '0,0']),
    "every step once, in order, with each device's bytes",
  );
});
