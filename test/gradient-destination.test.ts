// Gradients written where they go (src/engine/output-destination.ts): the backward walk offers each variable's slot
// to the kernel that makes its final gradient, and on the native backend that kernel writes it there. Checked: the
// gradients are tfjs's (tf.variableGrads, bit for bit) in fp32 and bf16; the dense and conv kernels' gradients and
// the biases' are in their slots; a weight read twice (a layer applied twice) still gets the sum; a slot of the wrong
// length is left alone; on the stock cpu backend nothing is taken and nothing changes.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { backwardWithGradientReady } from '../src/engine/gradient-tape.js';
import { startBackend } from '../src/engine/backend.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { getEngine } from '../src/engine/engine-registry.js';
import { identical } from './fixtures/native-compare.js';

const native = loadNativeAddon();
if (!native.loaded && process.env.TANDEM_REQUIRE_NATIVE === '1') t.fail(`native addon required: ${native.reason}`);

/** conv (fused with bias and relu) → BN → pool → dense → dense applied twice (its weights read twice) → dense. */
function model(): tf.LayersModel {
  const input = tf.input({ shape: [8, 8, 3] });
  const init = (seed: number) => tf.initializers.glorotUniform({ seed });
  const conv = tf.layers.conv2d({ filters: 6, kernelSize: 3, activation: 'relu', kernelInitializer: init(1) });
  let x = conv.apply(input) as tf.SymbolicTensor;
  x = tf.layers.batchNormalization({ name: 'bn' }).apply(x) as tf.SymbolicTensor;
  x = tf.layers.maxPooling2d({ poolSize: 2 }).apply(x) as tf.SymbolicTensor;
  x = tf.layers.flatten().apply(x) as tf.SymbolicTensor;
  x = tf.layers.dense({ units: 16, activation: 'relu', kernelInitializer: init(2), name: 'fc' }).apply(x) as never;
  const twice = tf.layers.dense({ units: 16, activation: 'tanh', kernelInitializer: init(3), name: 'twice' });
  x = twice.apply(twice.apply(x)) as tf.SymbolicTensor;
  const out = tf.layers.dense({ units: 4, kernelInitializer: init(4), name: 'head' }).apply(x) as tf.SymbolicTensor;
  return tf.model({ inputs: input, outputs: out });
}

function run(m: tf.LayersModel, wrongLength = false) {
  const vars = m.trainableWeights.map(w => w.read() as tf.Variable);
  const offsets: number[] = [];
  let total = 0;
  for (const v of vars) {
    offsets.push(total);
    total += v.size;
  }
  const layout = new Float32Array(new SharedArrayBuffer(total * 4));
  const slot = (i: number) => layout.subarray(offsets[i], offsets[i] + vars[i].size + (wrongLength ? 1 : 0));
  const x = tf.tensor4d(
    Float32Array.from({ length: 4 * 8 * 8 * 3 }, (_, i) => Math.sin(i * 0.37)),
    [4, 8, 8, 3],
  );
  const y = tf.oneHot(tf.tensor1d([0, 1, 2, 3], 'int32'), 4);
  const loss = () => tf.losses.softmaxCrossEntropy(y, m.apply(x, { training: true }) as tf.Tensor);
  const inPlace: string[] = [];
  const got: Float32Array[] = [];
  const value = backwardWithGradientReady(
    tf,
    loss,
    vars,
    (i, g) => {
      const v = g.dataSync() as Float32Array;
      if (v.buffer === layout.buffer && v.byteOffset === offsets[i] * 4) inPlace.push(vars[i].name);
      got[i] = Float32Array.from(v);
    },
    i => (vars[i].name.includes('twice/bias') ? undefined : slot(i)), // one variable offered nothing
  );
  value.dispose();
  const { grads } = tf.variableGrads(loss as () => tf.Scalar, vars);
  const want = vars.map(v => grads[v.name].dataSync() as Float32Array);
  tf.dispose([x, y, ...Object.values(grads)]);
  return { vars, got, want, inPlace };
}

for (const [backend, precision] of [
  ['native', 'fp32'],
  ['native', 'bf16'],
  ['cpu', 'fp32'],
] as const) {
  t.test(`${backend} ${precision}: tfjs's gradients, the kernels' written in their slots`, async t => {
    if (backend === 'native' && !native.loaded) return;
    if (precision === 'bf16' && native.loaded && native.addon.bf16Support().implementation === '') return;
    await startBackend(tf, backend, { precision });
    const m = model();
    getEngine(backend).prepareModel?.(tf, m, { nativeFusion: true });
    const { vars, got, want, inPlace } = run(m);
    vars.forEach((v, i) => t.ok(identical(got[i], want[i]), `${v.name}: tfjs's bits`));
    if (backend === 'native') {
      // the head's matmul is fused (linear): its gradients come from one custom gradient, made before any is asked
      for (const name of ['conv2d', 'fc/kernel', 'fc/bias'])
        t.ok(
          inPlace.some(n => n.includes(name)),
          `${name} written in its slot`,
        );
      t.notOk(
        inPlace.some(n => n.includes('twice/kernel')),
        'a weight read twice: the sum, copied',
      );
      t.notOk(
        inPlace.some(n => n.includes('twice/bias')),
        'a variable offered no slot is not in one',
      );
      const wrong = run(m, true);
      t.same(wrong.inPlace, [], 'slots of the wrong length: none taken');
      vars.forEach((v, i) => t.ok(identical(wrong.got[i], want[i]), `${v.name}: still tfjs's bits`));
    } else t.same(inPlace, [], 'the stock backend writes no slot');
    m.dispose();
    if (native.loaded) native.addon.setPrecision('fp32');
  });
}
