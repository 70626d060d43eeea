import * as tf from '@tensorflow/tfjs';
import { fit } from '/work/wt-fitio/dist/src/index.js';
import { worstWeightDifference } from '/work/wt-fitio/dist/test/fixtures/fit-models.js';
await tf.setBackend('cpu');
function make() {
  const a = tf.input({ shape: [3], name: 'a' }), b = tf.input({ shape: [2, 2], name: 'b' });
  const fb = tf.layers.flatten().apply(b);
  const j = tf.layers.concatenate().apply([a, fb]);
  const h = tf.layers.dense({ units: 5, activation: 'relu', kernelInitializer: tf.initializers.glorotUniform({seed: 1}) }).apply(j);
  const o = tf.layers.dense({ units: 3, activation: 'softmax', kernelInitializer: tf.initializers.glorotUniform({seed: 2}) }).apply(h);
  const m = tf.model({ inputs: [a, b], outputs: o });
  m.compile({ optimizer: tf.train.adam(0.02), loss: 'categoricalCrossentropy', metrics: ['accuracy'] });
  return m;
}
function wrap(model) {
  const shapes = model.inputs.map(i => i.shape.slice(1));
  const sizes = shapes.map(s => s.reduce((p, q) => p * q, 1));
  const total = sizes.reduce((p, q) => p + q, 0);
  const flat = tf.input({ shape: [total] });
  const col = tf.layers.reshape({ targetShape: [total, 1, 1] }).apply(flat);
  let at = 0;
  const parts = shapes.map((s, i) => {
    const c = tf.layers.cropping2D({ cropping: [[at, total - at - sizes[i]], [0, 0]] }).apply(col);
    at += sizes[i];
    return tf.layers.reshape({ targetShape: s }).apply(c);
  });
  const w = tf.model({ inputs: flat, outputs: model.apply(parts) });
  w.compile({ optimizer: model.optimizer, loss: model.loss, metrics: ['accuracy'] });
  return w;
}
const N = 48;
const xa = tf.randomUniform([N, 3], -1, 1, 'float32', 3), xb = tf.randomUniform([N, 2, 2], -1, 1, 'float32', 4);
const y = tf.oneHot(tf.randomUniform([N], 0, 3, 'int32', 5), 3).toFloat();
const ref = make(), mine = make();
mine.setWeights(ref.getWeights());
const args = { epochs: 2, batchSize: 12, shuffle: false, verbose: 0 };
const e = await ref.fit([xa, xb], y, args);
const w = wrap(mine);
const packed = tf.concat([xa.reshape([N, -1]), xb.reshape([N, -1])], 1);
try {
const g = await fit(w, packed, y, { ...args, devices: 2, backend: 'cpu' });
console.log(JSON.stringify(e.history), JSON.stringify(g.history), worstWeightDifference(ref, mine));
} catch (err) { console.log('ERR', err.message.slice(0, 600)); }
