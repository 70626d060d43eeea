/**
 * `npm run bench -- overlap`: alexnet-mini on 2 devices; for each EMULATED
 * link bandwidth (and none), the step time of each strategy beside the lower
 * bound max(compute, comm) and the sequential sum compute + comm. compute and
 * comm are the per-step compute-thread time and the total exchange time
 * (all groups, emulated link included) measured in the sequential run; step
 * times and compute are steady-state (after the warm-up steps). Then, per
 * link, two-group and per-layer once more with `forwardWait: 'step'` (the whole
 * update waited for before forward) beside the default per-group forward waits.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { train, type TrainConfig, type TrainSummary } from '../src/index.js';

export interface OverlapOptions {
  steps: number;
  perDeviceBatch: number;
  links: string[];
  out: string;
}

const STRATEGIES = ['sequential', 'two-group', 'per-layer', 'buckets'] as const;
/** Strategies also run with forwardWait 'step', for the comparison with the default per-group waits. */
const WAIT_COMPARED = ['two-group', 'per-layer'] as const;

function exchangePerStep(s: TrainSummary): number {
  return s.timings.meanExchangeMs * s.strategy.groups.length;
}

export async function runOverlap(opts: OverlapOptions): Promise<void> {
  const base: TrainConfig = {
    model: 'alexnet-mini',
    data: 'synthetic-images',
    imageSize: [32, 32, 3],
    datasetSize: 8192,
    devices: 2,
    batch: 2 * opts.perDeviceBatch,
    steps: opts.steps,
    optimizer: 'sgd',
    lr: 0.01,
    momentum: 0.9,
  };
  console.log(
    `overlap bench: alexnet-mini 32x32x3, 2 devices, ${opts.perDeviceBatch} samples per device, ${opts.steps} ` +
      `steps, wasm. ` +
      'Links are EMULATED: the comm side is held for bytes/bandwidth of a ring all-reduce.',
  );
  const rows: Record<string, unknown>[] = [];
  for (const link of opts.links) {
    const results: Record<string, TrainSummary> = {};
    for (const strategy of STRATEGIES) results[strategy] = await train({ ...base, strategy, link });
    const seq = results.sequential;
    const compute = seq.timings.steadyComputeMs;
    const comm = exchangePerStep(seq);
    const lower = Math.max(compute, comm),
      sum = compute + comm;
    console.log(
      `\nlink ${link === 'none' ? 'none (shared memory)' : `${link} (EMULATED)`}: compute ${compute.toFixed(1)} ms, ` +
        `comm ${comm.toFixed(1)} ms per step` +
        `; lower bound ${lower.toFixed(1)} ms, sequential sum ${sum.toFixed(1)} ms`,
    );
    console.log('| strategy | groups | step ms | / lower bound | / sum |\n|---|---:|---:|---:|---:|');
    for (const strategy of STRATEGIES) {
      const r = results[strategy];
      console.log(
        `| ${strategy} | ${r.strategy.groups.length} | ${r.steadyStepMs.toFixed(1)} | ` +
          `${(r.steadyStepMs / lower).toFixed(2)} | ${(r.steadyStepMs / sum).toFixed(2)} |`,
      );
      rows.push({
        link,
        emulated: link !== 'none',
        strategy,
        groups: r.strategy.groups.length,
        stepMs: r.steadyStepMs,
        computeMs: compute,
        commMs: comm,
        lowerBoundMs: lower,
        sumMs: sum,
        fcGroupExchangeMs: strategy === 'two-group' ? r.timings.meanExchangeMs : undefined,
        forwardWait: 'group',
      });
    }
    console.log(
      '\n| strategy | forward waits per group, step ms | per step, step ms | group / step |\n|---|---:|---:|---:|',
    );
    for (const strategy of WAIT_COMPARED) {
      const perStep = await train({ ...base, strategy, link, forwardWait: 'step' });
      const perGroup = results[strategy].steadyStepMs;
      console.log(
        `| ${strategy} | ${perGroup.toFixed(1)} | ${perStep.steadyStepMs.toFixed(1)} | ` +
          `${(perGroup / perStep.steadyStepMs).toFixed(3)} |`,
      );
      rows.push({
        link,
        emulated: link !== 'none',
        strategy,
        groups: perStep.strategy.groups.length,
        stepMs: perStep.steadyStepMs,
        forwardWait: 'step',
      });
    }
  }
  mkdirSync(opts.out, { recursive: true });
  writeFileSync(
    `${opts.out}/overlap.json`,
    JSON.stringify(
      { bench: 'overlap', date: new Date().toISOString(), options: opts, note: 'links are emulated', rows },
      null,
      2,
    ),
  );
  console.log(`\nJSON: ${opts.out}/overlap.json`);
}
