// tandem's BatchNormalization training kernel (flat loops) against tfjs-layers' own layer
// (moments + batchNorm, differentiated by tfjs): the output, the moving statistics and the
// gradients for x, γ and β after one training step, on ranks 2–4, channel axes last and
// not last, on every engine.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { trainBatchNormalization } from '../src/model/sync-batch-norm.js';
import { startBackend } from '../src/engine/backend.js';
import { prng } from '../src/data/synthetic-images.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import type { BackendName } from '../src/engine/backend.js';
import {
  JS_BATCH_NORM_LOOPS,
  batchNormLoops,
  nativeBatchNormLoops,
  type BatchNormLoops,
  type ChannelGeometry,
} from '../src/engine/batch-norm-loops.js';

interface Outputs {
  y: Float32Array;
  mean: Float32Array;
  variance: Float32Array;
  dx: Float32Array;
  dGamma: Float32Array;
  dBeta: Float32Array;
}

/**
 * A BatchNormalization layer (momentum 0: the moving statistics become the batch's) trained one
 * step on x: tfjs-layers' own (stock) or with tandem's kernel (trainBatchNormalization).
 */
function trainStep(
  x: tf.Tensor,
  gamma: tf.Tensor,
  beta: tf.Tensor,
  dy: tf.Tensor,
  axis: number,
  epsilon: number,
  withTandem: boolean,
): Outputs {
  const a = (axis + x.rank) % x.rank;
  if (!withTandem && a !== x.rank - 1) {
    // tfjs-layers' own gradient fails on a channel axis that is not the last ("Size(84) must match
    // the product of shape 1,3,1"): the stock answer comes from the transposed problem, axis last.
    const perm = [...x.shape.keys()].filter(i => i !== a).concat(a),
      back = perm.map((_, i) => perm.indexOf(i));
    const o = trainStep(tf.transpose(x, perm), gamma, beta, tf.transpose(dy, perm), -1, epsilon, false);
    const untranspose = (v: Float32Array) =>
      read(
        tf.transpose(
          tf.tensor(
            v,
            perm.map(i => x.shape[i]),
          ),
          back,
        ),
      );
    return { ...o, y: untranspose(o.y), dx: untranspose(o.dx) };
  }
  const model = tf.sequential({
    layers: [tf.layers.batchNormalization({ inputShape: x.shape.slice(1), axis, epsilon, momentum: 0 })],
  });
  const C = gamma.size;
  model.layers[0].setWeights([gamma, beta, tf.zeros([C]), tf.ones([C])]);
  if (withTandem) t.same(trainBatchNormalization(tf, model), [model.layers[0].name], 'the layer is patched');
  const [gammaVar, betaVar, meanVar, varianceVar] = model.layers[0].weights.map(w => w.read() as tf.Variable);
  const xVar = tf.variable(x);
  const forward = () => model.apply(xVar, { training: true }) as tf.Tensor;
  const { grads } = tf.variableGrads(() => tf.sum(tf.mul(forward(), dy)) as tf.Scalar, [xVar, gammaVar, betaVar]);
  const y = forward();
  const out = {
    y: read(y),
    mean: read(meanVar),
    variance: read(varianceVar),
    dx: read(grads[xVar.name]),
    dGamma: read(grads[gammaVar.name]),
    dBeta: read(grads[betaVar.name]),
  };
  xVar.dispose();
  model.dispose();
  return out;
}

function read(t: tf.Tensor): Float32Array {
  return t.dataSync().slice() as Float32Array;
}

/**
 * The largest difference relative to the largest magnitude of `want` (the scale of the quantity),
 * absolute below 1 (a batch of one has dx = 0 exactly; tfjs's composition gives -1.9e-6).
 */
function scaledDiff(got: Float32Array, want: Float32Array): number {
  const scale = Math.max(1, ...Array.from(want, Math.abs));
  return Math.max(0, ...Array.from(got, (g, i) => Math.abs(g - want[i]) / scale));
}

const engines: BackendName[] = ['cpu', 'wasm', ...(loadNativeAddon().loaded ? ['native' as const] : [])];
const cases: [number[], number][] = [
  [[6, 5], -1],
  [[4, 3, 7], -1],
  [[4, 3, 7], 1],
  [[3, 5, 4, 6], -1],
  [[3, 5, 4, 6], 1],
  [[2, 4, 4, 3], 2],
  [[1, 1, 1, 2], -1],
];

for (const engine of engines) {
  t.test(`${engine}: y, batch mean and variance, dx, dγ, dβ equal tfjs's composition within 1e-5`, async t => {
    await startBackend(tf, engine);
    const r = prng(21);
    for (const [shape, axis] of cases) {
      const C = shape[(axis + shape.length) % shape.length];
      const values = (n: number, scale: number, offset = 0) =>
        Array.from({ length: n }, () => offset + (r() - 0.5) * scale);
      const size = shape.reduce((a, b) => a * b, 1);
      tf.tidy(() => {
        const x = tf.tensor(values(size, 6, 2), shape),
          dy = tf.tensor(values(size, 2), shape);
        const gamma = tf.tensor1d(values(C, 1, 1)),
          beta = tf.tensor1d(values(C, 1));
        const want = trainStep(x, gamma, beta, dy, axis, 1e-3, false),
          got = trainStep(x, gamma, beta, dy, axis, 1e-3, true);
        const worst = Object.fromEntries(
          Object.keys(want).map(k => [k, scaledDiff(got[k as keyof Outputs], want[k as keyof Outputs])]),
        );
        t.ok(
          Object.values(worst).every(d => d <= 1e-5),
          `x [${shape}] axis ${axis}: ${Object.entries(worst)
            .map(([k, d]) => `${k} ${d.toExponential(1)}`)
            .join(', ')}`,
        );
      });
    }
  });
}

t.test('the kernel is not the stock composition by accident: a wrong epsilon is seen', async t => {
  await startBackend(tf, 'cpu');
  tf.tidy(() => {
    const x = tf.tensor([1, 2, 3, 4, 5, 6], [3, 2]),
      g = tf.ones([2]),
      b = tf.zeros([2]),
      dy = tf.ones([3, 2]);
    t.ok(
      scaledDiff(trainStep(x, g, b, dy, -1, 1e-3, true).y, trainStep(x, g, b, dy, -1, 0.5, false).y) > 1e-3,
      'different epsilon, different y',
    );
  });
});

t.test('the addon loops give the JS loops bits, channels last and not, all five, relu fused and not', async t => {
  const load = loadNativeAddon();
  if (!load.loaded) {
    t.ok(process.env.TANDEM_REQUIRE_NATIVE !== '1', `the native addon is required here: ${load.reason}`);
    return;
  }
  const native = nativeBatchNormLoops(load.addon);
  const r = prng(5);
  const geometries: ChannelGeometry[] = [
    { outer: 32 * 16 * 16, channels: 32, inner: 1 },
    { outer: 7, channels: 3, inner: 1 },
    { outer: 4, channels: 5, inner: 33 },
    { outer: 1, channels: 6, inner: 7 },
    { outer: 0, channels: 2, inner: 1 },
  ];
  for (const g of geometries) {
    const size = g.outer * g.channels * g.inner,
      C = g.channels;
    const floats = (n: number, scale: number, offset = 0) =>
      Float32Array.from({ length: n }, () => offset + (r() - 0.5) * scale);
    const x = floats(size, 6, 2),
      dy = floats(size, 2),
      gamma = floats(C, 1, 1),
      beta = floats(C, 1);
    const n = Math.max(1, g.outer * g.inner);
    const mean = Float32Array.from(JS_BATCH_NORM_LOOPS.channelSums(x, g), s => s / n);
    const invStd = Float64Array.from(
      JS_BATCH_NORM_LOOPS.centeredSquareSums(x, mean, g),
      s => 1 / Math.sqrt(s / n + 1e-3),
    );
    const scale = Float64Array.from(invStd, (k, c) => gamma[c] * k);
    const sums = Float32Array.from(JS_BATCH_NORM_LOOPS.gradientSums(dy, x, mean, invStd, g));
    // a fused relu's output: its zeros, a -0 and a NaN (relu's derivative is NaN there)
    const z = JS_BATCH_NORM_LOOPS.normalize(x, mean, scale, beta, g, true);
    if (size > 2) [z[1], z[2]] = [-0, NaN];
    const run = (loops: BatchNormLoops) => [
      loops.channelSums(x, g),
      loops.centeredSquareSums(x, mean, g),
      loops.normalize(x, mean, scale, beta, g),
      loops.normalize(x, mean, scale, beta, g, true),
      loops.gradientSums(dy, x, mean, invStd, g),
      loops.gradientSums(dy, x, mean, invStd, g, z),
      loops.inputGradient(dy, x, mean, invStd, gamma, sums, n, g),
      loops.inputGradient(dy, x, mean, invStd, gamma, sums, n, g, z),
    ];
    const bytes = (a: Float32Array | Float64Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('hex');
    const want = run(JS_BATCH_NORM_LOOPS).map(bytes),
      got = run(native).map(bytes);
    t.same(got, want, `[${g.outer}, ${g.channels}, ${g.inner}]: the same bits`);
  }
  t.equal(batchNormLoops().name, 'native', 'training uses the addon loops where it loaded');
});
