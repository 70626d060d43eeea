/**
 * `npm run bench -- hosts [--models alexnet-mini,alexnet] [--rates 10gbit,1gbit,100mbit | --links 1G,100M] [--schedules ...] [--hooks none,fp16,powersgd] [--quick] [--steps N] [--batch B]`:
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
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
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
  stepsOf,
  untimedSteps,
  type HostsBenchOptions,
  type HostsModel,
  type HostsRow,
} from './hosts-figures.js';
import {
  allReduceAcrossHosts,
  ddpAcrossHosts,
  DEVICE_THREADS,
  tandemAcrossHosts,
  tandemComputeOnly,
  torchComputeOnly,
  type AutoEvent,
  type RunShape,
  type TandemTimes,
} from './hosts-runs.js';
import { findTorchPython } from './torch-reference.js';
import { loadGlooAddon } from '../src/collectives/gloo/gloo-addon.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { spansFromChromeTrace, timelineSvg } from '../src/monitor/timeline-picture.js';
import { candidateKey } from '../src/profiling/auto-candidates.js';
import type { HookChoice } from '../src/profiling/schedule-model.js';
import type { StrategyName } from '../src/pipeline/strategy.js';

const LINK_NOTE =
  "links: real TCP between two network namespaces over a veth pair, each end's egress shaped by tc tbf (not emulated)";
const PROBE_REPEATS = 5;

/**
 * What one model's runs share: the shape of a run, its parameter count, its compute-only times — one device alone
 * (`computeMs`), and one device in each of two processes at once (`computeBothMs`: what compute gets on this machine
 * when both hosts compute, no exchange) — and PyTorch's.
 */
interface ModelBase {
  shape: RunShape;
  parameters: number;
  computeMs: number;
  computeBothMs: number;
  torchComputeMs?: number;
  torch?: string;
}

function shapeOf(model: HostsModel, opts: HostsBenchOptions): RunShape {
  const d = MODEL_DEFAULTS[model];
  const steps = stepsOf(model, opts);
  return { model, batchPerDevice: opts.batch ?? d.batch, steps, untimed: untimedSteps(steps), timeoutMs: 900_000 };
}

let nextPort = 29500;

async function modelBase(
  model: HostsModel,
  opts: HostsBenchOptions,
  python: string | undefined,
  rows: HostsRow[],
): Promise<ModelBase> {
  const shape = shapeOf(model, opts);
  const compute = await tandemComputeOnly(shape);
  const both = await tandemComputeOnly(shape, 2);
  const base: ModelBase = {
    shape,
    parameters: compute.parameters,
    computeMs: slowerHostMedian(compute.hostsMs),
    computeBothMs: slowerHostMedian(both.hostsMs),
  };
  rows.push({
    model,
    link: 'none',
    kind: 'compute-only',
    schedule: 'tandem, 1 device alone',
    stepMs: base.computeMs,
    samplesPerSecond: shape.batchPerDevice / (base.computeMs / 1000),
    hostsMs: compute.hostsMs,
    ...cpuOf(compute.cpuMsPerStep),
  });
  rows.push({
    model,
    link: 'none',
    kind: 'compute-only',
    schedule: 'tandem, 1 device in each of 2 processes at once (both hosts computing, no exchange)',
    stepMs: base.computeBothMs,
    samplesPerSecond: (2 * shape.batchPerDevice) / (base.computeBothMs / 1000),
    hostsMs: both.hostsMs,
    ...cpuOf(both.cpuMsPerStep),
  });
  if (python !== undefined) {
    const t = await torchComputeOnly(python, shape);
    if (t.parameters !== base.parameters) {
      throw new Error(
        `hosts bench: bench/torch's ${model} has ${t.parameters} parameters, tandem's ${base.parameters}: not the same model`,
      );
    }
    Object.assign(base, { torchComputeMs: t.medianMs, torch: t.torch });
    rows.push({
      model,
      link: 'none',
      kind: 'compute-only',
      schedule: `PyTorch ${t.torch}, 1 process alone`,
      stepMs: t.medianMs,
      samplesPerSecond: shape.batchPerDevice / (t.medianMs / 1000),
      hostsMs: [],
    });
  }
  console.log(
    `${model}: ${base.parameters} parameters (PyTorch: ${python === undefined ? 'not run' : 'the same'}); ` +
      `${shape.batchPerDevice} samples per device, ${shape.steps} steps (${shape.untimed} untimed); compute alone ${base.computeMs.toFixed(1)} ms, ` +
      `two processes at once ${base.computeBothMs.toFixed(1)} ms${compute.cpuMsPerStep ? ` (CPU per step alone: ${compute.cpuMsPerStep[0].toFixed(1)} ms)` : ''}`,
  );
  return base;
}

/** `cpuMsPerStep` and the CPU bound (all processes' CPU per step / this machine's cores) of a row, when measured. */
function cpuOf(cpuMsPerStep: number[] | undefined): Pick<HostsRow, 'cpuMsPerStep' | 'cpuBoundMs'> {
  if (cpuMsPerStep === undefined) return {};
  return { cpuMsPerStep, cpuBoundMs: cpuMsPerStep.reduce((a, b) => a + b, 0) / os.availableParallelism() };
}

/** Where each tandem run's Chrome trace (host 0's, every host's spans) and its timeline picture go: out/, not committed. */
const TIMELINES = 'out/hosts-timelines';

function tracePath(base: ModelBase, link: LinkRate, run: string): string {
  mkdirSync(TIMELINES, { recursive: true });
  return `${TIMELINES}/${base.shape.model}-${link}-${run}.json`;
}

/** The last three steps of `trace` as an SVG beside it (what `tandem trace TRACE --svg OUT` draws). */
function drawTimeline(trace: string, title: string): void {
  const spans = spansFromChromeTrace(JSON.parse(readFileSync(trace, 'utf8')));
  writeFileSync(
    trace.replace(/\.json$/, '.svg'),
    timelineSvg(spans, `hosts bench: ${title}`, { steps: { kind: 'last', count: 3 } }),
  );
}

/** What auto predicted for a schedule: its step, and the process CPU per step it counted (and whether that set the step). */
type Prediction = Pick<AutoEvent['candidates'][number], 'predictedMs' | 'cpuMsPerStep' | 'cpuBound'>;

/** auto's pick among its candidates (its key), or its prediction alone. */
function autoPick(auto: AutoEvent): Prediction {
  const key = candidateKey({
    strategy: auto.strategy as StrategyName,
    forwardWait: auto.forwardWait as 'group' | 'step',
    exchangeOrder: auto.exchangeOrder as 'ready' | 'priority',
    chunkFloats: auto.chunkFloats,
    commHook: (auto.commHook ?? 'none') as HookChoice,
  });
  return auto.candidates.find(c => c.key === key) ?? { predictedMs: auto.predictedMs };
}

/** One tandem row: the run's slower-host median beside the prediction. */
function tandemRow(
  base: ModelBase,
  link: LinkRate,
  schedule: string,
  t: TandemTimes,
  bound: number,
  lineMs: number,
  prediction?: Prediction,
): HostsRow {
  const predictedMs = prediction?.predictedMs;
  const stepMs = slowerHostMedian(t.hostsMs);
  const hung = t.hungAtExit?.length
    ? ` (host ${t.hungAtExit.join(', ')} hung after its last step and was killed: the end-of-run bug in the README)`
    : '';
  const vs =
    predictedMs === undefined
      ? ''
      : `, predicted ${predictedMs.toFixed(1)} (measured / predicted ${(stepMs / predictedMs).toFixed(2)})`;
  const cpu = cpuOf(t.cpuMsPerStep);
  const cpuText = cpu.cpuMsPerStep
    ? `; CPU per step ${cpu.cpuMsPerStep.map(c => c.toFixed(1)).join(' + ')} ms on ${os.availableParallelism()} cores: ≥ ${cpu.cpuBoundMs!.toFixed(1)} ms`
    : '';
  const m = t.machineMsPerStep;
  const machineText = m
    ? `; machine per step: busy ${m.busyMs.toFixed(1)} ms (kernel ${m.kernelMs.toFixed(1)}), idle ${m.idleMs.toFixed(1)}`
    : '';
  console.log(`  tandem ${schedule}: ${stepMs.toFixed(1)} ms/step${vs}${cpuText}${machineText}${hung}`);
  return {
    model: base.shape.model,
    link,
    kind: 'tandem',
    schedule,
    stepMs,
    samplesPerSecond: (2 * base.shape.batchPerDevice) / (stepMs / 1000),
    lowerBoundMs: bound,
    lineRateBoundMs: lowerBoundMs(base.computeMs, lineMs),
    hostsMs: t.hostsMs,
    ...(predictedMs !== undefined ? { predictedMs } : {}),
    ...(prediction?.cpuMsPerStep !== undefined
      ? { predictedCpuMsPerStep: prediction.cpuMsPerStep, predictedCpuBound: prediction.cpuBound }
      : {}),
    ...cpu,
    machineBoundMs: Math.max(bound, base.computeBothMs, cpu.cpuBoundMs ?? 0),
    ...(m ? { machineMsPerStep: m } : {}),
    ...(t.hungAtExit?.length ? { hostsHungAtExit: t.hungAtExit } : {}),
  };
}

/** auto first (--strategy auto --comm-hook auto: it measures the link and predicts every candidate), then each schedule × hook beside its prediction. */
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
      nextPort++,
      trace,
    );
    drawTimeline(trace, `auto at ${link} (real TCP, tc tbf)`);
    auto = t.auto;
    if (auto) console.log(`  auto: ${auto.reason}`);
    rows.push(
      tandemRow(
        base,
        link,
        `auto → ${auto ? `${auto.strategy}/${auto.forwardWait}/${auto.exchangeOrder}${auto.chunkFloats ? `:${auto.chunkFloats}` : ''}/${auto.commHook ?? 'none'}` : '?'}`,
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
      const trace = tracePath(base, link, `${schedule}-${hook}`);
      const t = await tandemAcrossHosts(net, base.shape, run.args, nextPort++, trace);
      drawTimeline(trace, `${schedule}${hook === 'none' ? '' : ` + ${hook}`} at ${link} (real TCP, tc tbf)`);
      rows.push(
        tandemRow(
          base,
          link,
          `${schedule}${hook === 'none' ? '' : ` + ${hook}`}`,
          t,
          bound,
          lineMs,
          predicted.get(run.key),
        ),
      );
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
  const commHosts = await allReduceAcrossHosts(net, base.parameters, PROBE_REPEATS, nextPort++, shape.timeoutMs);
  const commMs = slowerHostMedian(commHosts);
  const lineMs = lineRateAllReduceMs(base.parameters, bitsPerSecondOf(link));
  console.log(
    `${model} at ${link}: all-reduce of ${base.parameters} floats ${commMs.toFixed(1)} ms (at line rate ${lineMs.toFixed(1)} ms)`,
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
    const d = await ddpAcrossHosts(net, python, shape, nextPort++);
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
    return `${ns.reason}; the hosts bench runs 2 hosts in network namespaces and shapes their link with tc (run it as root on Linux)`;
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
    `hosts bench: 2 hosts x 1 device (native, ${DEVICE_THREADS} thread), models ${opts.models.join(', ')}; ${LINK_NOTE}; ` +
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
    `\n${LINK_NOTE}. Step: the slower host's median ms over the timed steps; lower bound: max(compute alone, measured all-reduce), ` +
      `line-rate bound (JSON): max(compute alone, the all-reduce at the link's rate) (PyTorch DDP: PyTorch alone's compute); ` +
      `CPU per step: each host process's CPU time, every thread, over the timed steps (/proc); machine bound: max(lower bound, compute with both hosts computing ` +
      `at once, Σ CPU per step / ${os.availableParallelism()} cores) — both hosts share this machine's cores; load average after ${loadAfter.map(l => l.toFixed(2)).join(' ')}`,
  );
  printHostsTable(rows);
  printScheduleByHookTable(rows, opts.hooks);
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
