// The step loop posts step s+1 while step s trains (one host): a compute thread starts the next step without waiting
// for the main thread. Shown with a main thread that is blocked after each step (a slow onStep): the devices' spans of
// step s+1 begin before the main thread is free again after step s. Not ahead where the main thread needs the devices
// idle between two steps: after a checkpoint step, step s+1 begins only after the checkpoint is written. The bits of
// a run are those of the step-by-step loop: strategies.test.ts and lossless.test.ts compare against sequential and one
// device; checkpoint.test.ts and stopping.test.ts compare checkpoints with uninterrupted runs. A step's stepMs is its
// period: what the loop did after the step before (here a slow onStepApplied) counts.
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, type Span, type StepMetrics, type TrainConfig } from '../src/index.js';
import { wallNow } from '../src/monitor/span.js';

const base: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [6, 6, 1],
  datasetSize: 300,
  batch: 12,
  devices: 2,
  backend: 'cpu',
  seed: 5,
  steps: 6,
};
const BLOCK_MS = 150;

/** The earliest compute span of `step` over every device. */
function stepBegan(spans: readonly Span[], step: number): number {
  return Math.min(...spans.filter(s => s.thread === 'compute' && s.step === step).map(s => s.start));
}

function blockMainThread(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    /* the main thread is busy: nothing of its loop runs */
  }
}

t.test('a main thread busy after step s does not hold step s+1 back: its compute starts meanwhile', async t => {
  const spans: Span[] = [];
  const freeAgain = new Map<number, number>();
  await train(base, {
    onSpans: s => {
      spans.push(...s);
    },
    onStep: m => {
      blockMainThread(BLOCK_MS);
      freeAgain.set(m.step, wallNow());
    },
  });
  for (let step = 2; step < base.steps!; step++) {
    const began = stepBegan(spans, step + 1),
      free = freeAgain.get(step)!;
    t.ok(
      began < free - BLOCK_MS / 2,
      `step ${step + 1} began ${(free - began).toFixed(0)} ms before the main thread was free after step ${step}`,
    );
  }
});

t.test('a checkpoint step is not overtaken: step s+1 begins after step s is checkpointed', async t => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-ahead-'));
  const spans: Span[] = [];
  const written = new Map<number, number>();
  await train(
    { ...base, checkpointEvery: 2, checkpointDir: dir },
    {
      onSpans: s => {
        spans.push(...s);
      },
      onEvent: e => {
        if (e.type === 'checkpoint') written.set(e.step, wallNow());
      },
    },
  );
  t.same([...written.keys()], [2, 4, 6], 'checkpoints of steps 2, 4 and 6');
  for (const step of [2, 4]) {
    t.ok(
      stepBegan(spans, step + 1) > written.get(step)!,
      `step ${step + 1} began after step ${step}'s checkpoint was written`,
    );
  }
});

t.test("stepMs is the step's period: the main thread's work after the step before counts", async t => {
  const metrics: StepMetrics[] = [];
  const began = performance.now();
  await train(base, {
    onStep: m => {
      metrics.push(m);
    },
    onStepApplied: () => blockMainThread(BLOCK_MS),
  });
  const wall = performance.now() - began;
  for (const m of metrics.slice(1))
    t.ok(
      m.stepMs >= BLOCK_MS,
      `step ${m.step}: ${m.stepMs.toFixed(0)} ms, with the ${BLOCK_MS} ms onStepApplied of step ${m.step - 1}`,
    );
  const sum = metrics.reduce((s, m) => s + m.stepMs, 0);
  t.ok(sum <= wall, `the steps' ms (${sum.toFixed(0)}) fit in the run's wall time (${wall.toFixed(0)})`);
  t.equal(metrics.length, base.steps, 'one metrics per step');
});
