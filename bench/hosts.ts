/**
 * `npm run bench -- hosts [--models alexnet-mini,alexnet] [--rates 10gbit,1gbit,100mbit | --links 1G,100M] [--schedules
 * ...] [--hooks none,fp16,powersgd] [--quick] [--steps N] [--batch B]`:
 * tandem across 2 hosts × 1 device, the hosts being two network namespaces
 * on this machine joined by a veth pair whose ends' egress is shaped with
 * `tc tbf` — real TCP through the kernel at that rate, not the emulated
 * `--link`. For each model and link rate: auto's pick (it measures the link
 * and predicts every candidate), then each schedule × comm hook
 * (hosts-figures.ts SCHEDULES) beside the cost model's prediction of it
 * (auto's candidate of the same key); step time and samples/s; beside them the
 * parts of the lower bound max(compute, comm) — compute: one device alone,
 * same per-device batch, no exchange; comm: an all-reduce of the model's
 * full gradient over tandem's gloo transport across the same link — and, in
 * the same run, PyTorch DDP (gloo, tcp:// init, one rank per namespace) on
 * the same model, held to max(PyTorch's own compute, comm).
 *
 * Step time: the slower host's median of the timed steps (the first third
 * untimed). Needs root (namespaces, tc) and the gloo addon; the DDP rows
 * need a Python with torch. Writes OUT/hosts.json (--out, default bench/results) and every run's trace and
 * timeline under out/hosts-timelines.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { makeHostPair, namespaceSupport, type HostPair, type LinkRate } from './network-namespaces.js';
import { killRunningJobs } from './hosts-job.js';
import {
  bitsPerSecondOf,
  lineRateAllReduceMs,
  lowerBoundMs,
  MODEL_DEFAULTS,
  printHostsTable,
  printScheduleByHookTable,
  scheduleRun,
  slowerHostMedian,
  type HostsBenchOptions,
  type HostsRow,
} from './hosts-figures.js';
import {
  allReduceAcrossHosts,
  ddpAcrossHosts,
  DEVICE_THREADS,
  tandemAcrossHosts,
  type AutoEvent,
} from './hosts-runs.js';
import { printSecretTable, secretOverhead, secretRounds } from './hosts-secret.js';
import { findTorchPython } from './torch-reference.js';
import { loadGlooAddon } from '../src/collectives/gloo/gloo-addon.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';

const LINK_NOTE =
  "links: real TCP between two network namespaces over a veth pair, each end's egress shaped by tc tbf (not emulated)";
const PROBE_REPEATS = 5;

import {
  autoPick,
  drawTimeline,
  modelBase,
  takePort,
  tandemRow,
  tracePath,
  type ModelBase,
  type Prediction,
} from './hosts-rows.js';

/**
 * auto first (--strategy auto --comm-hook auto: it measures the link and predicts every candidate), then each schedule
 * × hook beside its prediction.
 */
async function scheduleRows(
  net: HostPair,
  base: ModelBase,
  link: LinkRate,
  opts: HostsBenchOptions,
  bound: number,
  lineMs: number,
): Promise<{ rows: HostsRow[]; auto?: AutoEvent }> {
  const rows: HostsRow[] = [];
  let auto: AutoEvent | undefined;
  if (opts.schedules.includes('auto')) {
    const trace = tracePath(base, link, 'auto');
    const t = await tandemAcrossHosts(
      net,
      base.shape,
      ['--strategy', 'auto', '--comm-hook', 'auto', '--powersgd-start-step', '0'],
      takePort(),
      trace,
    );
    drawTimeline(trace, `auto at ${link} (real TCP, tc tbf)`);
    auto = t.auto;
    if (auto) console.log(`  auto: ${auto.reason}`);
    rows.push(
      tandemRow(
        base,
        link,
        `auto → ${auto ? autoLabel(auto) : '?'}`,
        t,
        bound,
        lineMs,
        auto ? autoPick(auto) : undefined,
      ),
    );
  }
  const split = auto?.candidates.find(c => c.splitLayer !== undefined)?.splitLayer;
  const predicted = new Map<string, Prediction>(auto?.candidates.map(c => [c.key, c]) ?? []);
  for (const schedule of opts.schedules) {
    if (schedule === 'auto') continue;
    for (const hook of opts.hooks) {
      const run = scheduleRun(schedule, hook, split);
      const name = `${schedule}${hook === 'none' ? '' : ` + ${hook}`}`;
      const both = opts.secret.length > 1;
      const runs = await secretRounds(opts.secret, opts.secretRounds, async secret => {
        const trace = tracePath(base, link, `${schedule}-${hook}${both ? `-${secret}-secret` : ''}`);
        const t = await tandemAcrossHosts(net, base.shape, run.args, takePort(), trace, secret);
        drawTimeline(trace, `${name} at ${link} (real TCP, tc tbf)`);
        return t;
      });
      for (const { secret, times, roundsMs } of runs) {
        const label = secret === 'without' && both ? `${name} (without secret)` : name;
        const row = tandemRow(base, link, label, times, bound, lineMs, predicted.get(run.key));
        rows.push(both ? { ...row, secret, roundsMs } : row);
      }
    }
  }
  return { rows, auto };
}

async function linkRows(
  net: HostPair,
  base: ModelBase,
  link: LinkRate,
  python: string | undefined,
  opts: HostsBenchOptions,
): Promise<HostsRow[]> {
  const { shape } = base;
  const model = shape.model;
  net.shape(link);
  const global = 2 * shape.batchPerDevice;
  const commHosts = await allReduceAcrossHosts(net, base.parameters, PROBE_REPEATS, takePort(), shape.timeoutMs);
  const commMs = slowerHostMedian(commHosts);
  const lineMs = lineRateAllReduceMs(base.parameters, bitsPerSecondOf(link));
  console.log(
    `${model} at ${link}: all-reduce of ${base.parameters} floats ${commMs.toFixed(1)} ms (at line rate ` +
      `${lineMs.toFixed(1)} ms)`,
  );
  const rows: HostsRow[] = [
    {
      model,
      link,
      kind: 'comm',
      schedule: `gloo all-reduce, full gradient (line rate: ${lineMs.toFixed(0)} ms)`,
      stepMs: commMs,
      hostsMs: commHosts,
    },
  ];
  const bound = lowerBoundMs(base.computeMs, commMs);
  const scheduled = await scheduleRows(net, base, link, opts, bound, lineMs);
  rows.push(...scheduled.rows);
  if (scheduled.auto?.link) rows[0].measuredLink = scheduled.auto.link;
  if (python !== undefined && base.torchComputeMs !== undefined) {
    const d = await ddpAcrossHosts(net, python, shape, takePort());
    if (d.parameters !== base.parameters)
      throw new Error(
        `hosts bench: PyTorch DDP's ${model} has ${d.parameters} parameters, tandem's ${base.parameters}`,
      );
    const stepMs = slowerHostMedian(d.hostsMs);
    console.log(`  PyTorch DDP: ${stepMs.toFixed(1)} ms/step`);
    rows.push({
      model,
      link,
      kind: 'ddp',
      schedule: `PyTorch ${d.torch} DDP (gloo)`,
      stepMs,
      samplesPerSecond: global / (stepMs / 1000),
      lowerBoundMs: lowerBoundMs(base.torchComputeMs, commMs),
      lineRateBoundMs: lowerBoundMs(base.torchComputeMs, lineMs),
      hostsMs: d.hostsMs,
    });
  }
  return rows;
}

/** Why this bench cannot run here, or undefined. */
function refusal(): string | undefined {
  const ns = namespaceSupport();
  if (!ns.ok)
    return (
      `${ns.reason}; the hosts bench runs 2 hosts in network namespaces and shapes their link with tc (run it ` +
      `as root on Linux)`
    );
  const gloo = loadGlooAddon();
  if (!gloo.loaded) return `the gloo addon is not loaded (${gloo.reason})`;
  const native = loadNativeAddon();
  if (!native.loaded)
    return 'the native engine addon is not built (npm_config_nodedir=/usr node native/build-addon.mjs)';
  return undefined;
}

export async function runHostsBench(opts: HostsBenchOptions): Promise<void> {
  const why = refusal();
  if (why !== undefined) {
    console.error(`bench hosts: cannot run: ${why}`);
    process.exitCode = 1;
    return;
  }
  const python = opts.torch ? findTorchPython() : undefined;
  const loadBefore = os.loadavg();
  console.log(
    `hosts bench: 2 hosts x 1 device (native, ${DEVICE_THREADS} thread), models ${opts.models.join(', ')}; ` +
      `${LINK_NOTE}; ` +
      `${os.availableParallelism()} cores, load average ${loadBefore.map(l => l.toFixed(2)).join(' ')}`,
  );
  if (python === undefined)
    console.log(
      opts.torch
        ? '(no PyTorch rows: `python3 -c "import torch"` fails here; Debian: apt-get install python3-torch)'
        : '(--quick: no PyTorch rows)',
    );
  const net = makeHostPair();
  const onSignal = (signal: NodeJS.Signals): void => {
    killRunningJobs();
    net.close();
    console.error(`bench hosts: ${signal}: stopped, namespaces removed`);
    process.exit(130);
  };
  for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(s, onSignal);
  const rows: HostsRow[] = [];
  const bases: ModelBase[] = [];
  try {
    for (const model of opts.models) {
      const base = await modelBase(model, opts, python, rows);
      bases.push(base);
      for (const link of opts.rates ?? MODEL_DEFAULTS[model].rates)
        rows.push(...(await linkRows(net, base, link, python, opts)));
    }
  } finally {
    killRunningJobs();
    net.close();
    for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.off(s, onSignal);
  }
  const loadAfter = os.loadavg();
  console.log(
    `\n${LINK_NOTE}. Step: the slower host's median ms over the timed steps; lower bound: max(compute alone, ` +
      `measured all-reduce), ` +
      (`line-rate bound (JSON): max(compute alone, the all-reduce at the link's rate) (PyTorch DDP: PyTorch alone's ` +
        `compute); `) +
      (`CPU per step: each host process's CPU time, every thread, over the timed steps (/proc); machine bound: ` +
        `max(lower bound, compute with both hosts computing `) +
      (`at once, Σ CPU per step / ${os.availableParallelism()} cores) — both hosts share this machine's cores; load ` +
        `average after ${loadAfter.map(l => l.toFixed(2)).join(' ')}`),
  );
  printHostsTable(rows);
  printScheduleByHookTable(
    rows.filter(r => r.secret !== 'without'),
    opts.hooks,
  );
  if (opts.secret.length > 1) printSecretTable(rows);
  mkdirSync(opts.out, { recursive: true });
  writeFileSync(
    `${opts.out}/hosts.json`,
    JSON.stringify(
      {
        bench: 'hosts',
        date: new Date().toISOString(),
        note: LINK_NOTE,
        cores: os.availableParallelism(),
        loadAverage: { before: loadBefore, after: loadAfter },
        threadsPerDevice: DEVICE_THREADS,
        options: opts,
        models: bases.map(b => ({
          model: b.shape.model,
          parameters: b.parameters,
          batchPerDevice: b.shape.batchPerDevice,
          steps: b.shape.steps,
          untimed: b.shape.untimed,
          computeMs: b.computeMs,
          torchComputeMs: b.torchComputeMs,
        })),
        ...(opts.secret.length > 1 ? { secretOverhead: secretOverhead(rows) } : {}),
        rows: rows.map(r => ({
          ...r,
          stepOverLowerBound: r.lowerBoundMs === undefined ? undefined : r.stepMs / r.lowerBoundMs,
          stepOverPredicted: r.predictedMs === undefined ? undefined : r.stepMs / r.predictedMs,
        })),
      },
      null,
      2,
    ),
  );
  console.log(`\nJSON: ${opts.out}/hosts.json`);
}

/** auto's choice as one label: strategy/forward wait/exchange order[:chunk]/hook. */
function autoLabel(auto: {
  strategy: string;
  forwardWait: string;
  exchangeOrder: string;
  chunkFloats?: number;
  commHook?: string;
}): string {
  const order = `${auto.exchangeOrder}${auto.chunkFloats ? `:${auto.chunkFloats}` : ''}`;
  return `${auto.strategy}/${auto.forwardWait}/${order}/${auto.commHook ?? 'none'}`;
}
