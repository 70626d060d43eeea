// Conv2D layers fused into one kernel on the native backend give what the same
// layers give unfused (conv2d, add, relu): outputs and every gradient, on a
// model with strides, paddings, no-bias and nested layers; layers that cannot
// be fused are left alone; training through tandem is the same with and
// without fusion. Skipped when the addon is not built, unless TANDEM_REQUIRE_NATIVE=1 (CI).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { startBackend } from '../src/engine/backend.js';
import { nativeAddonOrSkip } from './fixtures/native-addon-or-skip.js';
import { nativeKernelCounts } from '../src/engine/native/native-backend.js';
import { fuseConvLayers, FUSED_CONV_KERNEL } from '../src/engine/native/fused-conv-layers.js';
import { MAX_POOL_OF_RELU_KERNEL } from '../src/engine/native/fused-pool-layers.js';
import { RELU_GRAD_KERNEL } from '../src/engine/native/elementwise-kernels.js';
import { train, type TrainConfig } from '../src/index.js';

/** A model with every kind of Conv2D layer: fusable ones and ones that must stay as they are. */
function buildModel(): tf.LayersModel {
  const init = (seed: number) => tf.initializers.glorotUniform({ seed });
  const inner = tf.sequential({
    name: 'inner',
    layers: [
      tf.layers.conv2d({
        inputShape: [8, 8, 16],
        filters: 8,
        kernelSize: 3,
        padding: 'valid',
        activation: 'relu',
        kernelInitializer: init(3),
        biasInitializer: 'ones',
        name: 'inner_relu_valid',
      }),
    ],
  });
  return tf.sequential({
    layers: [
      tf.layers.conv2d({
        inputShape: [16, 16, 3],
        filters: 8,
        kernelSize: 3,
        padding: 'same',
        activation: 'relu',
        kernelInitializer: init(1),
        biasInitializer: tf.initializers.randomUniform({ minval: -0.2, maxval: 0.2, seed: 11 }),
        name: 'relu_same',
      }),
      tf.layers.conv2d({
        filters: 16,
        kernelSize: 3,
        strides: 2,
        padding: 'same',
        useBias: false,
        kernelInitializer: init(2),
        name: 'linear_strided_nobias',
      }),
      inner,
      tf.layers.conv2d({
        filters: 8,
        kernelSize: 2,
        padding: 'same',
        activation: 'sigmoid',
        kernelInitializer: init(4),
        name: 'sigmoid_stays',
      }),
      tf.layers.conv2d({
        filters: 8,
        kernelSize: 2,
        padding: 'same',
        activation: 'elu',
        kernelInitializer: init(5),
        name: 'elu_stays',
      }),
      tf.layers.flatten(),
      tf.layers.dense({ units: 5, kernelInitializer: init(6), name: 'logits' }),
    ],
  });
}

/**
 * Relu convolutions followed by max pools of every kind: tiling 2×2 (valid), clipped windows (same, odd size),
 * overlapping 3×3 stride 2, gaps (1×1 stride 2); and two a pool must not take over: a linear convolution, and a relu
 * one whose output is also read by another branch.
 */
function buildPoolModel(): tf.LayersModel {
  const init = (seed: number) => tf.initializers.glorotUniform({ seed });
  const conv = (name: string, filters: number, activation: 'relu' | 'linear', seed: number) =>
    tf.layers.conv2d({
      filters,
      kernelSize: 3,
      padding: 'same',
      activation,
      kernelInitializer: init(seed),
      biasInitializer: tf.initializers.randomUniform({ minval: -0.3, maxval: 0.3, seed: seed + 10 }),
      name,
    });
  const input = tf.input({ shape: [15, 15, 3] });
  let h = conv('c_tiles_odd', 8, 'relu', 1).apply(input) as tf.SymbolicTensor;
  // 15×15 → 8×8: the last windows clipped
  h = tf.layers.maxPooling2d({ poolSize: 2, padding: 'same', name: 'p_same_clipped' }).apply(h) as tf.SymbolicTensor;
  h = conv('c_tiles', 8, 'relu', 2).apply(h) as tf.SymbolicTensor;
  h = tf.layers.maxPooling2d({ poolSize: 2, name: 'p_valid_tiles' }).apply(h) as tf.SymbolicTensor; // 4×4
  h = conv('c_overlap', 8, 'relu', 3).apply(h) as tf.SymbolicTensor;
  h = tf.layers
    .maxPooling2d({ poolSize: 3, strides: 1, padding: 'same', name: 'p_overlap' })
    .apply(h) as tf.SymbolicTensor;
  h = conv('c_gaps', 8, 'relu', 4).apply(h) as tf.SymbolicTensor;
  h = tf.layers.maxPooling2d({ poolSize: 1, strides: 2, name: 'p_gaps' }).apply(h) as tf.SymbolicTensor; // 2×2
  h = conv('c_linear', 8, 'linear', 5).apply(h) as tf.SymbolicTensor;
  h = tf.layers.maxPooling2d({ poolSize: 2, strides: 1, name: 'p_after_linear' }).apply(h) as tf.SymbolicTensor;
  const shared = conv('c_read_twice', 8, 'relu', 6).apply(h) as tf.SymbolicTensor;
  const pooled = tf.layers.maxPooling2d({ poolSize: 1, name: 'p_shared' }).apply(shared) as tf.SymbolicTensor;
  h = tf.layers.add().apply([pooled, shared]) as tf.SymbolicTensor;
  const logits = tf.layers
    .dense({ units: 5, kernelInitializer: init(7), name: 'logits' })
    .apply(tf.layers.flatten().apply(h)) as tf.SymbolicTensor;
  return tf.model({ inputs: input, outputs: logits });
}

/** Loss, outputs and every gradient of the model on x (values copied out). */
function lossAndGradients(model: tf.LayersModel, x: tf.Tensor, y: tf.Tensor) {
  const vars = model.trainableWeights.map(w => w.read() as tf.Variable);
  const { value, grads } = tf.variableGrads(
    () => tf.losses.softmaxCrossEntropy(y, model.apply(x, { training: true }) as tf.Tensor) as tf.Scalar,
    vars,
  );
  const out = {
    loss: value.dataSync()[0],
    grads: vars.map(v => ({ name: v.name, values: grads[v.name].dataSync().slice() as Float32Array })),
  };
  tf.dispose([value, ...Object.values(grads)]);
  return out;
}

/**
 * Whether oneDNN's fused convolution (bias and relu as post-ops) rounds as conv2d, add, relu do on this CPU. It does
 * where oneDNN adds the bias after the accumulation (seen on Intel with AMX); on AMD Zen 5 (AVX512, no AMX) it gives
 * about 30% of the outputs one unit in the last place apart, so fused and unfused agree to float rounding only there.
 */
function fusedRoundsAsUnfused(): boolean {
  return tf.tidy(() => {
    const x = tf.randomUniform([6, 16, 16, 3], -1, 1, 'float32', 7) as tf.Tensor4D;
    const filter = tf.randomUniform([3, 3, 3, 8], -1, 1, 'float32', 3) as tf.Tensor4D;
    const bias = tf.randomUniform([8], -1, 1, 'float32', 4);
    const a = tf.relu(tf.add(tf.conv2d(x, filter, 1, 'same'), bias)).dataSync();
    const b = tf.fused.conv2d({ x, filter, strides: 1, pad: 'same', bias, activation: 'relu' }).dataSync();
    return a.every((v, i) => Object.is(v, b[i]));
  });
}

/** Counts of values not the same bits, and the largest difference relative to the largest magnitude. */
function compare(a: ArrayLike<number>, b: ArrayLike<number>): { differing: number; relative: number } {
  let differing = 0,
    worst = 0,
    scale = 0;
  for (let j = 0; j < a.length; j++) {
    if (!Object.is(a[j], b[j])) differing++;
    worst = Math.max(worst, Math.abs(a[j] - b[j]));
    scale = Math.max(scale, Math.abs(a[j]));
  }
  return { differing, relative: scale > 0 ? worst / scale : worst };
}

/** Bit for bit where the fused kernel rounds as the unfused ones, else within float32 rounding (1e-5 relative). */
function sameValues(
  t: Pick<typeof import('tap').default, 'equal' | 'ok'>,
  exact: boolean,
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  what: string,
): void {
  const { differing, relative } = compare(a, b);
  if (exact) t.equal(differing, 0, what);
  else t.ok(relative <= 1e-5, `${what} to float rounding (${differing} values differ, at most ${relative} relative)`);
}

/** The same loss and every gradient (non-zero), bit for bit or to float rounding (`exact`). */
function sameLossAndGradients(
  t: Pick<typeof import('tap').default, 'equal' | 'ok'>,
  exact: boolean,
  a: ReturnType<typeof lossAndGradients>,
  b: ReturnType<typeof lossAndGradients>,
): void {
  sameValues(t, exact, [a.loss], [b.loss], 'same loss');
  for (const [i, g] of a.grads.entries()) {
    const nonzero = g.values.filter(v => v !== 0).length;
    t.ok(nonzero > 0, `${g.name}: ${nonzero} non-zero gradient values`);
    sameValues(t, exact, g.values, b.grads[i].values, `${g.name}: gradient identical`);
  }
}

function registerTests(): void {
  const exact = fusedRoundsAsUnfused();
  t.comment(
    exact
      ? "oneDNN's fused convolution rounds as the unfused layers here: compared bit for bit"
      : "oneDNN's fused convolution does not round as the unfused layers on this CPU: compared to float rounding",
  );
  t.test('fused Conv2D layers = unfused: loss and every gradient, bit for bit; the rest untouched', async t => {
    const x = tf.randomUniform([6, 16, 16, 3], -1, 1, 'float32', 7);
    const y = tf.oneHot(tf.tensor1d([0, 1, 2, 3, 4, 0], 'int32'), 5);
    const plain = buildModel(),
      fused = buildModel();
    const names = fuseConvLayers(tf, fused);
    t.same(
      names.sort(),
      ['inner_relu_valid', 'linear_strided_nobias', 'relu_same'],
      'relu and linear layers fused, nested ones included; sigmoid and elu left alone',
    );
    t.same(
      fuseConvLayers(tf, fused),
      [],
      'fusing again changes nothing (the fused layers have a call of their own now)',
    );
    const before = nativeKernelCounts()[FUSED_CONV_KERNEL]?.native ?? 0;
    const a = lossAndGradients(plain, x, y),
      b = lossAndGradients(fused, x, y);
    t.equal(
      (nativeKernelCounts()[FUSED_CONV_KERNEL]?.native ?? 0) - before,
      3,
      'the fused kernel ran natively, once per fused layer',
    );
    t.ok(Number.isFinite(a.loss), `loss ${a.loss}`);
    sameLossAndGradients(t, exact, a, b);
    const before2 = tf.memory().numTensors;
    lossAndGradients(fused, x, y);
    t.equal(tf.memory().numTensors, before2, 'a fused step leaves no tensor behind');
    tf.dispose([x, y]);
    plain.dispose();
    fused.dispose();
  });

  t.test('NaN in the input reaches the fused gradients as it reaches the unfused ones', async t => {
    const values = tf.randomUniform([2, 16, 16, 3], -1, 1, 'float32', 9).dataSync().slice();
    values[5] = NaN;
    const x = tf.tensor(values, [2, 16, 16, 3]),
      y = tf.oneHot(tf.tensor1d([1, 2], 'int32'), 5);
    const plain = buildModel(),
      fused = buildModel();
    fuseConvLayers(tf, fused);
    const a = lossAndGradients(plain, x, y),
      b = lossAndGradients(fused, x, y);
    const nanCount = (g: { values: Float32Array }[]) => g.reduce((s, v) => s + v.values.filter(Number.isNaN).length, 0);
    t.ok(nanCount(a.grads) > 0, `unfused: ${nanCount(a.grads)} NaN gradient values`);
    for (const [i, g] of a.grads.entries()) {
      t.equal(
        nanCount([b.grads[i]]),
        nanCount([g]),
        `${g.name}: ${nanCount([g])} NaN gradient values unfused, the same fused`,
      );
    }
    tf.dispose([x, y]);
    plain.dispose();
    fused.dispose();
  });

  t.test("a max pool alone after a relu convolution: its gradient takes relu's, the same gradients", async t => {
    const x = tf.randomUniform([6, 15, 15, 3], -1, 1, 'float32', 8);
    const y = tf.oneHot(tf.tensor1d([0, 1, 2, 3, 4, 0], 'int32'), 5);
    const plain = buildPoolModel(),
      fused = buildPoolModel();
    fuseConvLayers(tf, fused);
    const count = (k: string) => nativeKernelCounts()[k]?.native ?? 0;
    const before = { pool: count(MAX_POOL_OF_RELU_KERNEL), relu: count(RELU_GRAD_KERNEL) };
    const a = lossAndGradients(plain, x, y),
      b = lossAndGradients(fused, x, y);
    t.equal(
      count(MAX_POOL_OF_RELU_KERNEL) - before.pool,
      4,
      'the four pools alone after a relu convolution run as one kernel; the one after a linear convolution and the ' +
        'one whose input another layer also reads do not',
    );
    // unfused: 5 relu convolutions' gradients; fused: only the one read twice keeps its relu step
    t.equal(count(RELU_GRAD_KERNEL) - before.relu, 5 + 1, "relu's own gradient ran only where no pool took it");
    sameLossAndGradients(t, exact, a, b);
    const before2 = tf.memory().numTensors;
    lossAndGradients(fused, x, y);
    t.equal(tf.memory().numTensors, before2, 'a fused step leaves no tensor behind');
    const values = x.dataSync().slice();
    values[40] = NaN;
    const xNaN = tf.tensor(values, x.shape);
    const nanCount = (g: { values: Float32Array }[]) => g.reduce((s, v) => s + v.values.filter(Number.isNaN).length, 0);
    const c = lossAndGradients(plain, xNaN, y),
      d = lossAndGradients(fused, xNaN, y);
    t.ok(nanCount(c.grads) > 0, `NaN input, unfused: ${nanCount(c.grads)} NaN gradient values`);
    t.equal(nanCount(d.grads), nanCount(c.grads), 'NaN input: as many NaN gradient values fused');
    tf.dispose([x, y, xNaN]);
    plain.dispose();
    fused.dispose();
  });

  t.test('training on 2 devices: nativeFusion on and off give the same parameters', async t => {
    const config = {
      model: 'alexnet-mini',
      data: 'synthetic-images',
      imageSize: [12, 12, 3],
      classes: 5,
      datasetSize: 96,
      batch: 12,
      steps: 3,
      devices: 2,
      backend: 'native',
      optimizer: 'sgd',
      lr: 0.05,
      seed: 3,
    } satisfies TrainConfig;
    const on = await train({ ...config, nativeFusion: true }),
      off = await train({ ...config, nativeFusion: false });
    let moved = 0;
    t.ok(
      on.history[0].loss !== on.history[2].loss,
      `loss moves: ${on.history.map(h => h.loss.toFixed(4)).join(' -> ')}`,
    );
    on.weights.forEach(w => {
      moved += w.values.length;
    });
    const flat = (r: typeof on) => r.weights.flatMap(w => [...w.values]);
    sameValues(t, exact, flat(on), flat(off), `all ${moved} parameters identical`);
  });

  t.test('nativeFusion must be a boolean', async t => {
    await t.rejects(
      train({ model: 'mlp', data: 'synthetic-images', steps: 1, nativeFusion: 'yes' as unknown as boolean }),
      { code: 'BAD_CONFIG', message: /nativeFusion: must be true or false/ },
    );
  });
}

if (nativeAddonOrSkip()) {
  await startBackend(tf, 'native');
  registerTests();
}
