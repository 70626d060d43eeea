// The moving statistics of a BatchNormalization layer trained on tandem's kernel (src/model/sync-batch-norm.ts), at
// momenta other than 0: tfjs-layers' update, moving − (moving − batch)·(1 − momentum), with the batch statistics
// tandem computed, bit for bit, on cpu and native (where the update is a loop over the arrays), channels last and
// not, from several starting statistics and over three steps.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { trainBatchNormalization } from '../src/model/sync-batch-norm.js';
import { batchNormTraining } from '../src/model/batch-norm-training.js';
import { startBackend, type BackendName } from '../src/engine/backend.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { prng } from '../src/data/synthetic-images.js';

const engines: BackendName[] = ['cpu', ...(loadNativeAddon().loaded ? ['native' as const] : [])];
if (process.env.TANDEM_REQUIRE_NATIVE === '1' && !engines.includes('native'))
  t.fail('the native addon is required here (TANDEM_REQUIRE_NATIVE=1)');

const bits = (a: ArrayLike<number>) => Buffer.from(Float32Array.from(a).buffer).toString('hex');

for (const engine of engines) {
  t.test(`${engine}: moving mean and variance are tfjs-layers' update of tandem's batch statistics`, async t => {
    await startBackend(tf, engine);
    const r = prng(41);
    const floats = (n: number, scale: number, offset = 0) =>
      Array.from({ length: n }, () => offset + (r() - 0.5) * scale);
    let checked = 0;
    for (const [shape, axis] of [
      [[8, 5, 5, 4], -1],
      [[6, 3, 7], 1],
    ] as [number[], number][]) {
      for (const momentum of [0.99, 0.9, 0.5, 0.123]) {
        const C = shape[(axis + shape.length) % shape.length];
        const size = shape.reduce((a, b) => a * b, 1);
        const model = tf.sequential({
          layers: [tf.layers.batchNormalization({ inputShape: shape.slice(1), axis, momentum, epsilon: 1e-3 })],
        });
        const layer = model.layers[0];
        layer.setWeights([
          tf.tensor1d(floats(C, 1, 1)),
          tf.tensor1d(floats(C, 1)),
          tf.tensor1d(floats(C, 4)),
          tf.tensor1d(floats(C, 2, 2)),
        ]);
        trainBatchNormalization(tf, model);
        for (let step = 0; step < 3; step++) {
          tf.tidy(() => {
            const x = tf.tensor(floats(size, 6, 2), shape);
            const [gamma, beta, mean0, var0] = layer.getWeights();
            const batch = batchNormTraining(tf, x, gamma, beta, { axis, epsilon: 1e-3 });
            const update = (orig: tf.Tensor, value: tf.Tensor) =>
              tf.sub(orig, tf.mul(tf.sub(orig, value), 1 - momentum));
            const want = [update(mean0, batch.mean), update(var0, batch.variance)].map(w => bits(w.dataSync()));
            const before = bits(mean0.dataSync()); // the variable's tensor: read now, it changes with the step
            model.apply(x, { training: true });
            const [, , mean1, var1] = layer.getWeights();
            const got = [mean1, var1].map(w => bits(w.dataSync()));
            t.same(got, want, `[${shape}] axis ${axis} momentum ${momentum} step ${step}`);
            t.not(got[0], before, 'the moving mean moved');
            checked++;
          });
        }
        model.dispose();
      }
    }
    t.equal(checked, 24, 'two geometries, four momenta, three steps');
  });
}
