// Dropout's mask in training (seeded-random-layers.ts): tf.dropout's multiplier — 0 or float32's 1/keep, kept where
// float32's u + keep reaches 1 — drawn from tandem's counter-based stream instead of tfjs's alea (4× faster, the
// same distribution). Checked: only those two values; the kept share is keep within 5 standard deviations, in each
// eighth of the tensor too; neighbours are uncorrelated; a seed repeats its mask and another seed draws another; a
// Dropout layer with a noise shape and SpatialDropout1D drop whole rows as tfjs's do; rates 0 and 1 change nothing
// (tfjs applies a Dropout layer only for 0 < rate < 1).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { dropoutMultiplier, seedRandomLayers } from '../src/model/seeded-random-layers.js';
import { dropoutMaskJs } from '../src/engine/dropout-mask.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';

const N = 1 << 16;

for (const rate of [0.05, 0.25, 0.5, 0.9]) {
  t.test(`rate ${rate}: 0 or 1/keep, kept at keep's rate everywhere, uncorrelated`, async t => {
    const keep = Math.fround(1 - rate);
    const m = tf.tidy(() => dropoutMultiplier(tf, [N], rate, 7).dataSync() as Float32Array);
    t.ok(
      m.every(v => v === 0 || v === Math.fround(1 / keep)),
      'every value is 0 or float32 1/keep',
    );
    const kept = (from: number, to: number) => m.subarray(from, to).reduce((s, v) => s + (v !== 0 ? 1 : 0), 0);
    for (let part = 0; part < 8; part++) {
      const n = N / 8,
        k = kept(part * n, (part + 1) * n);
      const sd = Math.sqrt(n * keep * (1 - keep));
      t.ok(Math.abs(k - n * keep) < 5 * sd, `eighth ${part}: ${k} of ${n} kept (${(n * keep).toFixed(0)} expected)`);
    }
    let both = 0;
    for (let i = 1; i < N; i++) if (m[i] !== 0 && m[i - 1] !== 0) both++;
    const pairs = (N - 1) * keep * keep,
      sd = Math.sqrt(pairs * (1 - keep * keep));
    t.ok(Math.abs(both - pairs) < 5 * sd, `neighbours both kept ${both} times (${pairs.toFixed(0)} if independent)`);
  });
}

t.test('a seed repeats its mask; another seed draws another', async t => {
  const draw = (seed: number) => tf.tidy(() => Array.from(dropoutMultiplier(tf, [4096], 0.5, seed).dataSync()));
  t.same(draw(3), draw(3), 'seed 3 twice: the same mask');
  const [a, b] = [draw(3), draw(4)];
  t.ok(a.filter((v, i) => v !== b[i]).length > 1500, 'seeds 3 and 4: about half the cells differ');
});

t.test(
  'Dropout with a noise shape, and SpatialDropout1D, drop whole rows as tfjs does; rates 0 and 1 do nothing',
  async t => {
    const x = tf.ones([4, 6, 8]);
    const model = tf.sequential({
      layers: [
        tf.layers.dropout({ inputShape: [6, 8], rate: 0.5, noiseShape: [null as unknown as number, 1, 8] }),
        tf.layers.spatialDropout1d({ rate: 0.5 }),
      ],
    });
    seedRandomLayers(tf, model).at(1, 0, 1);
    const [first, second] = model.layers;
    const y1 = tf.tidy(() => (first.apply(x, { training: true }) as tf.Tensor).arraySync() as number[][][]);
    const y2 = tf.tidy(() => (second.apply(x, { training: true }) as tf.Tensor).arraySync() as number[][][]);
    // noise shape [batch, 1, 8]: a cell's fate is shared by the 6 steps of its sample and channel
    t.ok(
      y1.every(s => s.every(step => step.every((v, c) => v === s[0][c]))),
      'Dropout [null, 1, 8]: the same along the steps',
    );
    t.ok(
      y2.every(s => s.every(step => step.every((v, c) => v === s[0][c]))),
      'SpatialDropout1D: a channel dropped for every step of its sample',
    );
    t.ok(y1.flat(2).some(v => v === 0) && y1.flat(2).some(v => v === 2), 'some dropped, some kept (× 2)');
    for (const rate of [0, 1]) {
      const layer = tf.layers.dropout({ inputShape: [6, 8], rate });
      const m = tf.sequential({ layers: [layer] });
      seedRandomLayers(tf, m).at(1, 0, 1);
      const y = tf.tidy(() => (layer.apply(x, { training: true }) as tf.Tensor).dataSync());
      t.ok(
        y.every(v => v === 1),
        `rate ${rate}: the input unchanged (tfjs's own rule)`,
      );
      m.dispose();
    }
    x.dispose();
    model.dispose();
  },
);

t.test('the addon draws the JS loop’s mask, bit for bit', async t => {
  const load = loadNativeAddon();
  if (!load.loaded) {
    t.ok(process.env.TANDEM_REQUIRE_NATIVE !== '1', `the native addon is required here: ${load.reason}`);
    return;
  }
  for (const [size, rate, seed] of [
    [1, 0.5, 0],
    [17, 0.25, -3],
    [4099, 0.9, 2 ** 31 - 1],
    [295_000, 0.5, 123_456_789],
    [1 << 16, 1e-7, 42],
    [1000, 0.999999, 7],
  ]) {
    const got = tf.tidy(() => Float32Array.from(dropoutMultiplier(tf, [size], rate, seed).dataSync()));
    const keep = Math.fround(1 - rate);
    const base = Math.imul(seed | 0, 0x85ebca6b) ^ 0x2545f491;
    // the threshold dropoutMultiplier finds, by a linear scan from the top (another way to the same number)
    let lo = 1 << 24;
    while (lo > 0 && Math.fround((lo - 1) / 16777216 + keep) >= 1) lo--;
    const want = dropoutMaskJs(size, base, lo, Float32Array.of(0, 1 / keep));
    t.ok(Buffer.from(got.buffer).equals(Buffer.from(want.buffer)), `${size} values, rate ${rate}, seed ${seed}`);
  }
});
