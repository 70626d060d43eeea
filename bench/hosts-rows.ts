// The hosts bench's parts for one model: what its runs share (shape, parameter count, compute-only times), where
// each run's trace and timeline go, and one tandem row beside auto's prediction. The runs themselves: hosts.ts.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import type { LinkRate } from './network-namespaces.js';

import {
  lowerBoundMs,
  MODEL_DEFAULTS,
  slowerHostMedian,
  stepsOf,
  untimedSteps,
  type HostsBenchOptions,
  type HostsModel,
  type HostsRow,
} from './hosts-figures.js';
import { tandemComputeOnly, torchComputeOnly, type AutoEvent, type RunShape, type TandemTimes } from './hosts-runs.js';

import { spansFromChromeTrace, timelineSvg } from '../src/monitor/timeline-picture.js';
import { candidateKey } from '../src/profiling/auto-candidates.js';
import type { HookChoice } from '../src/profiling/schedule-model.js';
import type { StrategyName } from '../src/pipeline/strategy.js';

/**
 * What one model's runs share: the shape of a run, its parameter count, its compute-only times — one device alone
 * (`computeMs`), and one device in each of two processes at once (`computeBothMs`: what compute gets on this machine
 * when both hosts compute, no exchange) — and PyTorch's.
 */
export interface ModelBase {
  shape: RunShape;
  parameters: number;
  computeMs: number;
  computeBothMs: number;
  torchComputeMs?: number;
  torch?: string;
}

export function shapeOf(model: HostsModel, opts: HostsBenchOptions): RunShape {
  const d = MODEL_DEFAULTS[model];
  const steps = stepsOf(model, opts);
  return { model, batchPerDevice: opts.batch ?? d.batch, steps, untimed: untimedSteps(steps), timeoutMs: 900_000 };
}

let nextPort = 29500;

/** A port for the next job's rendezvous (each job its own). */
export function takePort(): number {
  return nextPort++;
}

export async function modelBase(
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
        `hosts bench: bench/torch's ${model} has ${t.parameters} parameters, tandem's ${base.parameters}: not the ` +
          `same model`,
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
      (`${shape.batchPerDevice} samples per device, ${shape.steps} steps (${shape.untimed} untimed); compute alone ` +
        `${base.computeMs.toFixed(1)} ms, `) +
      (`two processes at once ${base.computeBothMs.toFixed(1)} ` +
        `ms${compute.cpuMsPerStep ? ` (CPU per step alone: ${compute.cpuMsPerStep[0].toFixed(1)} ms)` : ''}`),
  );
  return base;
}

/** `cpuMsPerStep` and the CPU bound (all processes' CPU per step / this machine's cores) of a row, when measured. */
export function cpuOf(cpuMsPerStep: number[] | undefined): Pick<HostsRow, 'cpuMsPerStep' | 'cpuBoundMs'> {
  if (cpuMsPerStep === undefined) return {};
  return { cpuMsPerStep, cpuBoundMs: cpuMsPerStep.reduce((a, b) => a + b, 0) / os.availableParallelism() };
}

/**
 * Where each tandem run's Chrome trace (host 0's, every host's spans) and its timeline picture go: out/, not committed.
 */
const TIMELINES = 'out/hosts-timelines';

export function tracePath(base: ModelBase, link: LinkRate, run: string): string {
  mkdirSync(TIMELINES, { recursive: true });
  return `${TIMELINES}/${base.shape.model}-${link}-${run}.json`;
}

/** The last three steps of `trace` as an SVG beside it (what `tandem trace TRACE --svg OUT` draws). */
export function drawTimeline(trace: string, title: string): void {
  const spans = spansFromChromeTrace(JSON.parse(readFileSync(trace, 'utf8')));
  writeFileSync(
    trace.replace(/\.json$/, '.svg'),
    timelineSvg(spans, `hosts bench: ${title}`, { steps: { kind: 'last', count: 3 } }),
  );
}

/**
 * What auto predicted for a schedule: its step, and the process CPU per step it counted (and whether that set the
 * step).
 */
export type Prediction = Pick<AutoEvent['candidates'][number], 'predictedMs' | 'cpuMsPerStep' | 'cpuBound'>;

/** auto's pick among its candidates (its key), or its prediction alone. */
export function autoPick(auto: AutoEvent): Prediction {
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
export function tandemRow(
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
    ? `; CPU per step ${cpu.cpuMsPerStep.map(c => c.toFixed(1)).join(' + ')} ms on ${os.availableParallelism()} ` +
      `cores: ≥ ${cpu.cpuBoundMs!.toFixed(1)} ms`
    : '';
  const m = t.machineMsPerStep;
  const machineText = m
    ? `; machine per step: busy ${m.busyMs.toFixed(1)} ms (kernel ${m.kernelMs.toFixed(1)}), idle ` +
      `${m.idleMs.toFixed(1)}`
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
