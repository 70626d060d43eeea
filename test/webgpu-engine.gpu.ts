// The webgpu engine (tfjs-backend-webgpu on Dawn's Node bindings), on whatever adapter Dawn finds here — in CI
// Mesa's software Vulkan (llvmpipe), so the models are tiny and the steps few. Checked: 1 and 2 devices give the
// parameters of the cpu engine's run within 1e-5 (alexnet-mini, and a BatchNormalization ResNet-style model); a
// gradient group's exchange starts before backward ends (gradients are handed over as each asynchronous read
// returns); resume from a checkpoint is exact; a NaN loss is caught before any gradient is handed over; without
// an adapter `--backend webgpu` fails before any thread starts and says what is missing. Skips when Dawn finds no
// adapter, unless TANDEM_REQUIRE_WEBGPU=1 (then it fails).
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTraining, train, trainReference, type Span, type TrainConfig } from '../src/index.js';
import { probeWebGpu } from '../src/engine/webgpu/webgpu-availability.js';
import { webgpuOrSkip, WEBGPU_TOLERANCE } from './fixtures/webgpu-or-skip.js';
import { worstDifference } from './fixtures/weights-difference.js';
import { withFault } from './fixtures/fault-plugin.js';

const skip = webgpuOrSkip();
const probe = probeWebGpu(); // cached: the adapter the availability probe found

const TOLERANCE = WEBGPU_TOLERANCE;
const same = (a: { values: Float32Array }[], b: { values: Float32Array }[]) =>
  a.every((w, i) => w.values.every((v, j) => v === b[i].values[j]));

const base: TrainConfig = {
  data: 'synthetic-images',
  imageSize: [8, 8, 3],
  classes: 4,
  datasetSize: 32,
  batch: 8,
  steps: 3,
  seed: 3,
  optimizer: 'sgd',
  lr: 0.05,
  momentum: 0.9,
};

t.test('alexnet-mini: 1 and 2 webgpu devices = the cpu reference within 1e-5; resume is exact', { skip }, async t => {
  // One configuration for both checks (llvmpipe is slow); per-layer groups give the bits of sequential. (At 16x16 and 4
  // steps the difference grows to ~1.4e-4 by step 4 though step 1 agrees within 1.5e-8: sgd+momentum amplifying ulps.)
  const cfg: TrainConfig = { ...base, model: 'alexnet-mini', imageSize: [12, 12, 3], strategy: 'per-layer', steps: 4 };
  const ref = await trainReference({ ...cfg, backend: 'cpu' }); // one cpu engine, the whole batch, tfjs's optimizer
  const two = await train({ ...cfg, backend: 'webgpu', devices: 2 });
  const one = await train({ ...cfg, backend: 'webgpu', devices: 1 });
  for (const [devices, run] of [
    [1, one],
    [2, two],
  ] as const) {
    const diff = worstDifference(run.weights, ref.weights);
    t.ok(
      diff < TOLERANCE,
      `${devices} device(s): max |param - cpu reference| = ${diff.toExponential(2)} < ${TOLERANCE}`,
    );
    t.ok(
      Math.abs(run.history[0].loss - ref.losses[0]) < 1e-5,
      `${devices} device(s): first-step loss equals the reference loss`,
    );
  }
  // The adapter each device thread opened, as the engine reports it = what the availability probe's own process found.
  t.same(
    two.engineDevices?.map(d => d.driver),
    [probe.kind === 'ok' && probe.adapter, probe.kind === 'ok' && probe.adapter],
    'each device reports the adapter the probe found',
  );
  t.equal(
    two.engineDevices?.[0].software,
    /llvmpipe|lavapipe|swiftshader/i.test(probe.kind === 'ok' ? probe.adapter : ''),
    'software iff a CPU implementation',
  );
  const wrong = await trainReference({ ...cfg, backend: 'cpu', lr: 0.051 });
  t.ok(
    worstDifference(two.weights, wrong.weights) > TOLERANCE,
    'the comparison can fail: the reference with lr 0.051 is detected',
  );

  const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-webgpu-ckpt-'));
  const first = await train({
    ...cfg,
    backend: 'webgpu',
    devices: 2,
    steps: 2,
    checkpointEvery: 2,
    checkpointDir: dir,
  });
  t.ok(first.checkpointPath && existsSync(first.checkpointPath), 'checkpoint written at step 2');
  const resumed = await train({ ...cfg, backend: 'webgpu', devices: 2, resume: dir });
  t.equal(resumed.firstStep, 3, 'resume continues at step 3');
  t.ok(same(resumed.weights, two.weights), 'resume: 2 + 2 steps = 4 uninterrupted steps, bit for bit');
  t.same(
    resumed.history.map(h => h.loss),
    two.history.slice(2).map(h => h.loss),
    'resume: the same losses',
  );
});

t.test(
  'a gradient group is exchanged while backward still runs on the device (per-layer, 2 devices)',
  { skip },
  async t => {
    // Gradients are read asynchronously; each group is handed to the comm thread as its reads return, while the device
    // still computes the rest of backward. 16x16 images: the conv layers' backward on llvmpipe (~0.4-0.8 s measured)
    // outlasts the comm thread's wake-up and the thread's own walk of the tape even on a busy machine (at 12x12: once
    // -9 ms).
    const spans: Span[] = [];
    const handle = startTraining({
      ...base,
      model: 'alexnet-mini',
      imageSize: [16, 16, 3],
      backend: 'webgpu',
      devices: 2,
      strategy: 'per-layer',
      steps: 3,
    });
    handle.timeline$.subscribe(s => spans.push(s));
    await handle.done;
    for (let step = 2; step <= 3; step++) {
      // step 1 compiles the shaders
      for (let device = 0; device < 2; device++) {
        const mine = spans.filter(s => s.device === device && s.step === step);
        const firstExchange = Math.min(...mine.filter(s => s.kind === 'exchange').map(s => s.start));
        const backwardEnd = Math.max(
          ...mine.filter(s => s.kind === 'backward' && s.group !== undefined).map(s => s.end),
        );
        t.ok(
          firstExchange < backwardEnd,
          `step ${step} device ${device}: first exchange began ${(backwardEnd - firstExchange).toFixed(1)} ms ` +
            `before backward ended`,
        );
      }
    }
  },
);

t.test(
  'resnet-mini (BatchNormalization): 1 device = the cpu reference, 2 devices = 2 cpu devices, within 1e-5',
  { skip },
  async t => {
    const cfg: TrainConfig = { ...base, model: 'resnet-mini', steps: 2 };
    const ref = await trainReference({ ...cfg, backend: 'cpu' });
    const one = await train({ ...cfg, backend: 'webgpu', devices: 1 });
    const d1 = worstDifference(one.weights, ref.weights);
    t.ok(d1 < TOLERANCE, `1 device: max |param - cpu reference| = ${d1.toExponential(2)}`);
    t.ok(
      worstDifference(one.nonTrainableWeights, ref.nonTrainableWeights) < TOLERANCE,
      '1 device: moving statistics = the reference',
    );
    // webgpu normalises with each device's own batch (no synchronous reads inside forward): batchNorm 'local'.
    const local: TrainConfig = { ...cfg, devices: 2, batchNorm: 'local' };
    const cpu = await train({ ...local, backend: 'cpu' });
    const gpu = await train({ ...local, backend: 'webgpu' });
    t.ok(
      worstDifference(gpu.weights, ref.weights) > TOLERANCE,
      "local statistics differ from the global batch's: the comparison can fail",
    );
    const d2 = worstDifference(gpu.weights, cpu.weights);
    t.ok(d2 < TOLERANCE, `2 devices, batchNorm local: max |param - cpu| = ${d2.toExponential(2)}`);
    t.ok(
      worstDifference(gpu.nonTrainableWeights, cpu.nonTrainableWeights) < TOLERANCE,
      '2 devices: averaged moving statistics = cpu',
    );
    await t.rejects(
      train({ ...cfg, devices: 2, steps: 1, backend: 'webgpu', model: 'resnet-mini', imageSize: [4, 4, 3] }),
      { code: 'BAD_CONFIG', message: /batchNorm 'sync'.*--batch-norm local/ },
      'sync BatchNormalization on 2 webgpu devices is refused, naming the fix',
    );
  },
);

t.test(
  'a NaN loss on webgpu: stops the run before any gradient is handed over, or skips the step (skip-step)',
  { skip },
  async t => {
    // The loss is read asynchronously, ahead of every gradient: the decision is made before any gradient is handed
    // over.
    const cfg: TrainConfig = {
      model: 'mlp',
      data: 'synthetic-images',
      imageSize: [8, 8, 1],
      datasetSize: 64,
      batch: 8,
      steps: 4,
      devices: 2,
      backend: 'webgpu',
      ...withFault({ device: 1, step: 3, phase: 'forward', kind: 'nan' }),
    };
    let applied = 0;
    await t.rejects(
      train(cfg, {
        onStepApplied: () => {
          applied++;
        },
      }),
      {
        code: 'NON_FINITE',
        context: { device: 1, step: 3, phase: 'forward' },
        message:
          /^the loss is not finite in step 3 on device 1 \(NaN\): the step was stopped before any gradient was handed over/,
      },
    );
    t.equal(applied, 2, 'steps 1 and 2 applied, step 3 never');
    const summary = await train({ ...cfg, onNan: 'skip-step' });
    t.same(
      summary.skippedUpdates.map(u => [u.step, u.variable]),
      [[3, 'the loss (NaN) on device 1']],
      'step 3 skipped, named',
    );
    t.ok(
      summary.weights.every(w => w.values.every(Number.isFinite)),
      'parameters finite',
    );
  },
);

t.test('no adapter: --backend webgpu fails before any thread starts, saying what is missing', async t => {
  // A Vulkan loader pointed at no driver: Dawn finds no adapter (checked here by the probe itself).
  const cli = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
  const env = {
    ...process.env,
    VK_ICD_FILENAMES: '/nonexistent.json',
    VK_DRIVER_FILES: '/nonexistent.json',
    TANDEM_BACKEND: undefined,
  };
  const r = spawnSync(
    process.execPath,
    [cli, 'train', '--backend', 'webgpu', '--model', 'mlp', '--data', 'synthetic-images', '--steps', '1'],
    { encoding: 'utf8', env, timeout: 120_000 },
  );
  t.not(r.status, 0, `exits non-zero (status ${r.status})`);
  t.match(
    r.stderr,
    /backend 'webgpu' is not available: Dawn found no WebGPU adapter \(no Vulkan driver\); install a Vulkan driver.*mesa-vulkan-drivers >= 25.*bookworm-backports/s,
    'names what is missing and how to install it',
  );
  t.notMatch(r.stdout + r.stderr, /training on|device 0/, 'no device thread started');
});
