// The methods that read inside forward and backward, on the webgpu engine (every read awaited): local-head (method B)
// and partial-fc train on 2 webgpu devices to the cpu engine's result on 2 devices within 1e-5 — the extractor, and the
// full classifier assembled from the devices' heads. Tiny models and few steps (in CI the adapter is llvmpipe, software
// Vulkan). Skips when Dawn finds no adapter, unless TANDEM_REQUIRE_WEBGPU=1 (then it fails).
import t from 'tap';
import { train, type TrainConfig, type TrainSummary } from '../src/index.js';
import { probeWebGpu } from '../src/engine/webgpu/webgpu-availability.js';

const probe = probeWebGpu();
const required = process.env.TANDEM_REQUIRE_WEBGPU === '1';
const skip = probe.kind === 'ok' ? false : `no WebGPU adapter here: ${probe.reason}`;
if (skip && required) t.fail(`TANDEM_REQUIRE_WEBGPU=1 and ${skip}`);
else if (probe.kind === 'ok') t.comment(`webgpu adapter: ${probe.adapter}`);

/** float32 summation order differs between the engines, nothing else. */
const TOLERANCE = 1e-5;
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
const base: TrainConfig = { model: 'mlp', data: 'synthetic-images', imageSize: [8, 8, 1], classes: 5, datasetSize: 60, batch: 8, steps: 3, seed: 3,
  devices: 2, embedding: 8, lr: 0.1, momentum: 0.9, exportClassifier: true, evalSamples: 16 };

for (const [method, extra] of [['local-head', {}], ['partial-fc', { sampleRate: 0.6 }]] as const) {
  t.test(`${method} on 2 webgpu devices = 2 cpu devices within ${TOLERANCE}: extractor and full classifier`, { skip }, async t => {
    const cfg: TrainConfig = { ...base, method, ...extra };
    const cpu = await train({ ...cfg, backend: 'cpu' });
    const gpu = await train({ ...cfg, backend: 'webgpu' });
    t.same(gpu.classifier!.localClasses, [3, 2], 'heads of 3 and 2 labels');
    const dExtractor = maxAbs(extractor(gpu), extractor(cpu));
    t.ok(dExtractor < TOLERANCE, `extractor: max |webgpu - cpu| = ${dExtractor.toExponential(2)}`);
    const dFull = maxAbs(fullClassifier(gpu), fullClassifier(cpu));
    t.ok(dFull < TOLERANCE, `full classifier (every head): max |webgpu - cpu| = ${dFull.toExponential(2)}`);
    const dLoss = maxAbs(gpu.history.map(h => h.loss), cpu.history.map(h => h.loss));
    t.ok(dLoss < TOLERANCE, `losses of every step: max |webgpu - cpu| = ${dLoss.toExponential(2)}`);
    t.same(gpu.history.map(h => h.accuracy), cpu.history.map(h => h.accuracy), 'the same training accuracy every step');
    t.ok(gpu.classifier!.heldOut && gpu.classifier!.heldOut.samples > 0, 'held-out evaluation ran on webgpu');
    const wrong = await train({ ...cfg, backend: 'cpu', lr: 0.101 });
    t.ok(maxAbs(fullClassifier(gpu), fullClassifier(wrong)) > TOLERANCE, 'the comparison can fail: the cpu run with lr 0.101 is detected');
  });
}
