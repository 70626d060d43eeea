// What reads inside forward and backward, on the webgpu engine (every read awaited): local-head (method B) and
// partial-fc train on 2 webgpu devices to the cpu engine's result on 2 devices within 1e-5 — the extractor, and the
// full classifier assembled from the devices' heads, and resume from a checkpoint is exact, heads included; the
// profiler times every layer with awaited reads on the wall
// clock, and `--strategy auto` trains what it picks to the cpu reference within 1e-5. Tiny models and few steps (in CI
// the adapter is llvmpipe, software
// Vulkan). Skips when Dawn finds no adapter, unless TANDEM_REQUIRE_WEBGPU=1 (then it fails).
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { train, trainReference, type TrainConfig, type TrainSummary } from '../src/index.js';
import type { AutoChoice } from '../src/profiling/choose-strategy.js';
import { webgpuOrSkip, WEBGPU_TOLERANCE } from './fixtures/webgpu-or-skip.js';

const skip = webgpuOrSkip();

const TOLERANCE = WEBGPU_TOLERANCE;
function maxAbs(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity;
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}
/** The full classifier (extractor and every device's head, in label order) as one array. */
const fullClassifier = (s: TrainSummary) => new Float32Array(s.classifier!.fullClassifier!.weightData);
const extractor = (s: TrainSummary) => Float32Array.from(s.weights.flatMap(w => [...w.values]));

// 5 classes over 2 devices: heads of 3 and 2 labels.
const base: TrainConfig = {
  model: 'mlp',
  data: 'synthetic-images',
  imageSize: [8, 8, 1],
  classes: 5,
  datasetSize: 60,
  batch: 8,
  steps: 3,
  seed: 3,
  devices: 2,
  embedding: 8,
  lr: 0.1,
  momentum: 0.9,
  exportClassifier: true,
};

for (const [method, extra] of [
  ['local-head', {}],
  ['partial-fc', { sampleRate: 0.6 }],
] as const) {
  t.test(
    `${method} on 2 webgpu devices = 2 cpu devices within ${TOLERANCE}: extractor and full classifier`,
    { skip },
    async t => {
      const cfg: TrainConfig = { ...base, method, ...extra };
      const dir = mkdtempSync(path.join(os.tmpdir(), `tandem-webgpu-${method}-`));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const cpu = await train({ ...cfg, backend: 'cpu' });
      const tensors: number[][] = [];
      const gpu = await train(
        { ...cfg, backend: 'webgpu', checkpointEvery: 2, checkpointDir: dir },
        {
          onStep: m => {
            tensors.push(m.numTensors);
          },
        },
      );
      t.same(
        tensors[2],
        tensors[1],
        `no tensor leaks from step to step on the device threads (${tensors[1].join(', ')} tensors after steps 2 ` +
          `and 3)`,
      );
      t.same(gpu.classifier!.localClasses, [3, 2], 'heads of 3 and 2 labels');
      const dExtractor = maxAbs(extractor(gpu), extractor(cpu));
      t.ok(dExtractor < TOLERANCE, `extractor: max |webgpu - cpu| = ${dExtractor.toExponential(2)}`);
      const dFull = maxAbs(fullClassifier(gpu), fullClassifier(cpu));
      t.ok(dFull < TOLERANCE, `full classifier (every head): max |webgpu - cpu| = ${dFull.toExponential(2)}`);
      const dLoss = maxAbs(
        gpu.history.map(h => h.loss),
        cpu.history.map(h => h.loss),
      );
      t.ok(dLoss < TOLERANCE, `losses of every step: max |webgpu - cpu| = ${dLoss.toExponential(2)}`);
      t.same(
        gpu.history.map(h => h.accuracy),
        cpu.history.map(h => h.accuracy),
        'the same training accuracy every step',
      );
      t.ok(gpu.classifier!.heldOut && gpu.classifier!.heldOut.samples > 0, 'held-out evaluation ran on webgpu');
      const wrong = await train({ ...cfg, backend: 'cpu', lr: 0.101 });
      t.ok(
        maxAbs(fullClassifier(gpu), fullClassifier(wrong)) > TOLERANCE,
        'the comparison can fail: the cpu run with lr 0.101 is detected',
      );
      // The heads (values and optimizer state) come back from the step-2 checkpoint onto the device.
      const resumed = await train({ ...cfg, backend: 'webgpu', resume: dir });
      t.equal(resumed.firstStep, 3, 'resume continues at step 3');
      t.ok(
        maxAbs(fullClassifier(resumed), fullClassifier(gpu)) === 0,
        'resume: 2 + 1 steps = 3 uninterrupted steps, bit for bit (extractor and heads)',
      );
    },
  );
}

t.test(
  '--strategy auto on 2 webgpu devices: every layer profiled on the wall clock with awaited reads; the pick trains ' +
    'to the cpu reference',
  { skip },
  async t => {
    const cfg: TrainConfig = {
      model: 'mlp',
      data: 'synthetic-images',
      imageSize: [8, 8, 1],
      classes: 4,
      datasetSize: 32,
      batch: 8,
      steps: 2,
      seed: 3,
      devices: 2,
      lr: 0.1,
      momentum: 0.9,
    };
    let choice: AutoChoice | undefined;
    const run = await train(
      { ...cfg, backend: 'webgpu', strategy: 'auto' },
      {
        onAutoChoice: c => {
          choice = c;
        },
      },
    );
    const { profile } = choice!;
    t.equal(profile.clock.kind, 'wall', `clock: ${profile.clock.reason}`);
    t.equal(profile.backend, 'webgpu', "profiled on the devices' engine");
    const dense = profile.layers.filter(l => l.className === 'Dense');
    t.ok(dense.length >= 2, `${dense.length} Dense layers profiled`);
    t.ok(
      profile.layers.every(l => Number.isFinite(l.forwardMs + l.backwardMs) && l.forwardMs >= 0 && l.backwardMs >= 0),
      'finite, non-negative times',
    );
    t.ok(
      dense.every(l => l.forwardMs + l.backwardMs > 0),
      'every Dense layer takes measurable time',
    );
    t.ok(
      profile.stepForwardMs > 0 && profile.stepBackwardMs > 0,
      `a step: forward ${profile.stepForwardMs.toFixed(1)} ms, backward ${profile.stepBackwardMs.toFixed(1)} ms`,
    );
    t.equal(run.config.strategy, choice!.strategy, `trained with the chosen ${choice!.strategy}`);
    const ref = await trainReference({ ...cfg, backend: 'cpu' });
    const d = maxAbs(extractor(run), Float32Array.from(ref.weights.flatMap(w => [...w.values])));
    t.ok(d < TOLERANCE, `max |param - cpu reference| = ${d.toExponential(2)}`);
  },
);
