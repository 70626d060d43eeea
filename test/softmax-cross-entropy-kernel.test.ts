// The fused classifier loss (src/engine/softmax-cross-entropy.ts, native/softmax-cross-entropy-kernel.ts) against
// tfjs's own ops, bit for bit: the mean loss, the correct count and the logits' gradient for any dy, over batch
// counts from 1 and class counts from 2 (tf.oneHot's least depth), logits small and large, tied, ±Infinity and NaN,
// labels in and out of range, on the stock cpu backend and on the native backend's own elementwise kernels; then a
// model's every gradient through tandem's tape walk (gradient-tape.ts) with outputLoss's fused path against the same
// model with tfjs's loss. Skipped when the addon is not built, unless TANDEM_REQUIRE_NATIVE=1 (CI).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { counts, identical, startNativeAndStock } from './fixtures/native-compare.js';
import { prng } from '../src/data/synthetic-images.js';
import {
  fusedSoftmaxCrossEntropy,
  SOFTMAX_CE_GRAD_KERNEL,
  SOFTMAX_CE_KERNEL,
} from '../src/engine/softmax-cross-entropy.js';
import { outputLoss } from '../src/model/output-loss.js';
import { backwardWithGradientReady } from '../src/engine/gradient-tape.js';

const addon = await startNativeAndStock();
if (addon) registerTests();

interface Case {
  n: number;
  c: number;
  logits: Float32Array;
  labels: Int32Array;
  dy: number;
}

/** Logits of one of five kinds (ordinary, large, tied, with ±Infinity, with NaN); labels at times out of range. */
function randomCase(rand: () => number, n: number, c: number): Case {
  const kind = Math.floor(rand() * 5);
  const logits = new Float32Array(n * c).map(() => {
    if (kind === 2) return Math.floor(rand() * 3) - 1;
    const v = (rand() * 2 - 1) * (kind === 1 ? 80 : 4);
    if (kind === 3 && rand() < 0.1) return rand() < 0.5 ? Infinity : -Infinity;
    if (kind === 4 && rand() < 0.05) return NaN;
    return v;
  });
  const labels = new Int32Array(n).map(() => (rand() < 0.1 ? (rand() < 0.5 ? -1 : c) : Math.floor(rand() * c)));
  const dy = [1, 0.37, -2.5, 1e-3][Math.floor(rand() * 4)];
  return { n, c, logits, labels, dy };
}

/** tfjs's ops: loss·dy's value, count and logits gradient. */
function stock(k: Case): Float32Array[] {
  return tf.tidy(() => {
    const x = tf.tensor2d(k.logits, [k.n, k.c]),
      labels = tf.tensor1d(k.labels, 'int32');
    const lossOf = (z: tf.Tensor) => tf.losses.softmaxCrossEntropy(tf.oneHot(labels, k.c), z);
    const { value, grad } = tf.valueAndGrad((z: tf.Tensor) => tf.mul(lossOf(z), k.dy) as tf.Scalar)(x);
    const correct = tf.equal(tf.argMax(x, -1), labels).sum();
    return [value, correct, grad].map(v => Float32Array.from(v.dataSync()));
  });
}

/** The fused kernel (native backend): the same three (the count from a second run: valueAndGrad disposes it). */
function fused(k: Case): Float32Array[] {
  return tf.tidy(() => {
    const x = tf.tensor2d(k.logits, [k.n, k.c]),
      labels = tf.tensor1d(k.labels, 'int32');
    const run = (z: tf.Tensor) => {
      const out = fusedSoftmaxCrossEntropy(tf, z, labels);
      if (!out) throw new Error('no fused kernel on the native backend');
      return out;
    };
    const { value, grad } = tf.valueAndGrad((z: tf.Tensor) => tf.mul(run(z).loss, k.dy) as tf.Scalar)(x);
    return [value, run(x).correct, grad].map(v => Float32Array.from(v.dataSync()));
  });
}

function registerTests() {
  t.test("the fused loss gives tfjs's bits: loss, count, gradient", t => {
    const rand = prng(7);
    const before = counts(SOFTMAX_CE_KERNEL).native,
      gradsBefore = counts(SOFTMAX_CE_GRAD_KERNEL).native;
    let cases = 0,
      same = 0;
    for (const n of [1, 3, 32])
      for (const c of [2, 3, 10, 37])
        for (let r = 0; r < 6; r++) {
          const k = randomCase(rand, n, c);
          const mine = fused(k);
          tf.setBackend('cpu');
          let cpu: Float32Array[];
          try {
            cpu = stock(k);
          } finally {
            tf.setBackend('native');
          }
          const native = stock(k);
          cases++;
          const names = ['loss', 'correct', 'gradient'];
          const bad = names.filter((_, i) => !identical(mine[i], cpu[i]) || !identical(native[i], cpu[i]));
          if (bad.length === 0) same++;
          else t.fail(`n ${n}, c ${c}, dy ${k.dy}: ${bad.join(', ')} differ (${mine[0]} / ${cpu[0]} / ${native[0]})`);
        }
    t.equal(same, cases, `${same} of ${cases} cases the same bits`);
    t.equal(counts(SOFTMAX_CE_KERNEL).native - before, 2 * cases, 'the fused kernel ran for every case (twice)');
    t.equal(counts(SOFTMAX_CE_GRAD_KERNEL).native - gradsBefore, cases, 'and its gradient');
    t.end();
  });

  t.test('the fused loss is only taken where it applies', t => {
    tf.tidy(() => {
      const x = tf.randomUniform([4, 3]),
        labels = tf.tensor1d([0, 1, 2, 1], 'int32');
      t.ok(fusedSoftmaxCrossEntropy(tf, x, labels), 'native, float32 logits [N, C], int32 labels [N]');
      t.equal(fusedSoftmaxCrossEntropy(tf, x, tf.cast(labels, 'float32')), undefined, 'float32 labels');
      t.equal(fusedSoftmaxCrossEntropy(tf, x, tf.tensor1d([0, 1, 2], 'int32')), undefined, 'labels of another batch');
      t.equal(fusedSoftmaxCrossEntropy(tf, tf.reshape(x, [2, 2, 3]), labels), undefined, 'logits of rank 3');
      t.equal(fusedSoftmaxCrossEntropy(tf, tf.ones([4, 1]), labels), undefined, 'one class (tf.oneHot refuses it)');
      tf.setBackend('cpu');
      t.equal(fusedSoftmaxCrossEntropy(tf, tf.randomUniform([4, 3]), labels), undefined, 'the stock cpu backend');
      tf.setBackend('native');
    });
    t.end();
  });

  t.test("a model's gradients through tandem's tape walk: outputLoss's fused path equals tfjs's loss", t => {
    const model = tf.sequential({
      layers: [
        tf.layers.dense({ inputShape: [6], units: 8, activation: 'relu', kernelInitializer: 'glorotUniform' }),
        tf.layers.dense({ units: 5 }),
      ],
    });
    const rand = prng(11);
    const x = tf.tensor2d(
      Float32Array.from({ length: 16 * 6 }, () => rand() * 2 - 1),
      [16, 6],
    );
    const labels = tf.tensor1d(
      Int32Array.from({ length: 16 }, () => Math.floor(rand() * 5)),
      'int32',
    );
    const vars = model.trainableWeights.map(w => (w as unknown as { val: tf.Variable }).val);
    const gradients = (loss: () => tf.Tensor) => {
      const out: Float32Array[] = [];
      const y = backwardWithGradientReady(tf, loss, vars, (i, g) => (out[i] = Float32Array.from(g.dataSync())));
      const value = y.dataSync()[0];
      y.dispose();
      return { value, out };
    };
    const before = counts(SOFTMAX_CE_KERNEL).native;
    const spec = { kind: 'categorical' as const, fromProbabilities: false };
    const viaOutputLoss = gradients(() => {
      const { loss, correct } = outputLoss(tf, model.apply(x) as tf.Tensor, labels, spec, 5);
      correct.dispose();
      return tf.mul(loss, 3);
    });
    t.equal(counts(SOFTMAX_CE_KERNEL).native - before, 1, 'outputLoss took the fused kernel');
    const viaTfjs = gradients(() =>
      tf.mul(tf.losses.softmaxCrossEntropy(tf.oneHot(labels, 5), model.apply(x) as tf.Tensor), 3),
    );
    t.ok(Object.is(viaOutputLoss.value, viaTfjs.value), `the same loss (${viaOutputLoss.value})`);
    t.equal(viaOutputLoss.out.length, vars.length, 'every variable got a gradient');
    t.ok(
      viaOutputLoss.out.every((g, i) => identical(g, viaTfjs.out[i])),
      'every gradient the same bits',
    );
    tf.dispose([x, labels]);
    model.dispose();
    t.end();
  });
}
