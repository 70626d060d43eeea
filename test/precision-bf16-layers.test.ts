// Every layer the layer sweep trains (test/layer-sweep.test.ts: the image and token models that join every trainable
// layer class of tfjs-layers 4.22) trains in precision bf16 too, as a new user's model would: on 2 devices with the
// replicas checked at every step, finite losses within 1% of fp32's, every weight within bf16's rounding of the fp32
// run (||bf16 − fp32|| ≤ 5% of ||fp32||, or ≤ 1e-4 apart for a weight still near 0, such as a bias that started there
// and holds sums of rounded gradients), and bf16 really ran (some weight differs). Skipped where bf16 cannot run here
// (the refusal is tested in precision-bf16.test.ts).
import t from 'tap';
import { fileURLToPath } from 'node:url';
import { train, type TrainConfig } from '../src/index.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { bf16Support } from '../src/engine/native/bf16-support.js';
import { nativeAddonOrSkip } from './fixtures/native-addon-or-skip.js';

const sweep = (name: string) => fileURLToPath(new URL(`../../test/fixtures/models/sweep/${name}.mjs`, import.meta.url));
const run: TrainConfig = { datasetSize: 16, batch: 4, steps: 2, optimizer: 'sgd', lr: 0.1, seed: 3, backend: 'native' };
const MODELS: [string, TrainConfig][] = [
  ['image-layers', { ...run, data: 'synthetic-images', imageSize: [4, 4, 2], classes: 3 }],
  [
    'token-layers',
    { ...run, data: fileURLToPath(new URL('../../test/fixtures/tokens.mjs', import.meta.url)), classes: 3 },
  ],
];

/** ||a − b||, ||b|| and max |a − b|. */
function distance(a: Float32Array, b: Float32Array): { d: number; norm: number; max: number } {
  let d = 0,
    norm = 0,
    max = 0;
  a.forEach((v, i) => {
    d += (v - b[i]) ** 2;
    norm += b[i] ** 2;
    max = Math.max(max, Math.abs(v - b[i]));
  });
  return { d: Math.sqrt(d), norm: Math.sqrt(norm), max };
}

const load = nativeAddonOrSkip() ? loadNativeAddon() : undefined;
const refusal = load?.loaded ? bf16Support(load.addon).refusal : 'no native addon';
if (refusal) t.comment(`skipped: bf16 training (${refusal})`);
else
  for (const [model, data] of MODELS)
    t.test(`${model}: every layer trains in bf16 on 2 devices, within bf16's rounding of fp32`, async t => {
      const cfg: TrainConfig = { ...data, model: sweep(model), devices: 2, replicaCheckEvery: 1 };
      const bf16 = await train({ ...cfg, precision: 'bf16' });
      const fp32 = await train({ ...cfg, precision: 'fp32' });
      t.ok(bf16.nonTrainableIdentical, 'replicas identical (the replica check ran at every step)');
      bf16.history.forEach((h, i) => {
        const ref = fp32.history[i].loss;
        t.ok(Number.isFinite(h.loss) && Math.abs(h.loss - ref) <= 0.01 * ref, `step ${h.step}: ${h.loss} ~ ${ref}`);
      });
      let differs = false;
      const far = bf16.weights.filter((w, i) => {
        const { d, norm, max } = distance(w.values, fp32.weights[i].values);
        differs ||= d > 0;
        return !(d <= 0.05 * norm || max <= 1e-4);
      });
      t.same(
        far.map(w => w.name),
        [],
        `every one of ${bf16.weights.length} weights within bf16's rounding of fp32`,
      );
      t.ok(differs, 'bf16 ran: some weight differs from fp32');
    });
