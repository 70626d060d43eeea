// The faster conv/matmul kernels and gradients against tfjs's stock ones,
// computed two ways on the same inputs: stock first, then with tandem's installed.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { installFastGradients } from '../src/engine/fast-gradients.js';
import { startBackend } from '../src/engine/backend.js';
import { worstArrayDifference } from './fixtures/weights-difference.js';

type Case = {
  name: string;
  x: number[];
  w: number[];
  strides: number | [number, number];
  pad: 'same' | 'valid' | number;
};
const cases: Case[] = [];
for (const pad of ['same', 'valid', 1] as const) {
  for (const strides of [1, 2, [2, 1]] as (number | [number, number])[]) {
    for (const [x, w] of [
      [
        [2, 7, 7, 3],
        [3, 3, 3, 4],
      ],
      [
        [1, 8, 6, 2],
        [2, 2, 2, 3],
      ],
      [
        [3, 5, 5, 1],
        [5, 5, 1, 2],
      ],
      [
        [2, 6, 9, 2],
        [1, 3, 2, 2],
      ],
    ]) {
      cases.push({ name: `x${x} w${w} s${strides} ${pad}`, x, w, strides, pad });
    }
  }
}

function seededTensor(shape: number[], seed: number) {
  return tf.randomUniform(shape, -1, 1, 'float32', seed);
}

function convGrads(c: Case) {
  return tf.tidy(() => {
    const x = seededTensor(c.x, 1),
      w = seededTensor(c.w, 2);
    const f = (a: tf.Tensor, b: tf.Tensor) =>
      tf
        .conv2d(a as tf.Tensor4D, b as tf.Tensor4D, c.strides, c.pad)
        .square()
        .sum();
    const [dx, dw] = tf.grads(f)([x, w]);
    return [dx.arraySync(), dw.arraySync()];
  });
}

function fusedGrads(c: Case) {
  // linear fused conv calls Conv2DBackpropFilter directly
  return tf.tidy(() => {
    const x = seededTensor(c.x, 3),
      w = seededTensor(c.w, 4);
    const [, dw] = tf.grads((a: tf.Tensor, b: tf.Tensor) =>
      tf.fused
        .conv2d({ x: a as tf.Tensor4D, filter: b as tf.Tensor4D, strides: c.strides, pad: c.pad })
        .square()
        .sum(),
    )([x, w]);
    return dw.arraySync();
  });
}

// Small shapes, and a 2-row batch against a big weight matrix (the swapped-transpose path).
const MM_SHAPES: [number, number, number][] = [
  [4, 5, 3],
  [2, 50, 40],
];

function matmulGrads(ta: boolean, tb: boolean, [m, k, n]: [number, number, number]) {
  return tf.tidy(() => {
    const a = seededTensor(ta ? [k, m] : [m, k], 5),
      b = seededTensor(tb ? [n, k] : [k, n], 6);
    const [da, db] = tf.grads((p: tf.Tensor, q: tf.Tensor) => tf.matMul(p, q, ta, tb).square().sum())([a, b]);
    return [da.arraySync(), db.arraySync()];
  });
}

t.test('cpu: conv2d dx/dW and fused dW equal the stock gradients for every padding/stride case', async t => {
  await tf.setBackend('cpu');
  const stock = cases.map(c => ({ conv: convGrads(c), fused: fusedGrads(c) }));
  const FLAGS = [
    [false, false],
    [true, false],
    [false, true],
    [true, true],
  ];
  const stockMM = MM_SHAPES.map(shape => FLAGS.map(([a, b]) => matmulGrads(a, b, shape)));
  const report = installFastGradients(tf, 'cpu');
  t.ok(report.installed.includes('Conv2DBackpropFilter'), 'filter kernel replaced on cpu');
  cases.forEach((c, i) => {
    const fast = convGrads(c);
    t.ok(worstArrayDifference(fast[0], stock[i].conv[0]) < 1e-4, `dx ${c.name}`);
    t.ok(worstArrayDifference(fast[1], stock[i].conv[1]) < 1e-4, `dW ${c.name}`);
    t.ok(worstArrayDifference(fusedGrads(c), stock[i].fused) < 1e-4, `fused dW ${c.name}`);
  });
  // Unsupported (dilated) convolution still runs the stock path.
  const dil = tf.tidy(() =>
    tf
      .conv2d(
        seededTensor([1, 6, 6, 1], 1) as tf.Tensor4D,
        seededTensor([3, 3, 1, 1], 2) as tf.Tensor4D,
        1,
        'same',
        'NHWC',
        2,
      )
      .sum()
      .arraySync(),
  );
  t.type(dil, 'number');
  t.equal(installFastGradients(tf, 'cpu').installed.length, 0, 'installing twice is a no-op');
  // Reference: wasm with tandem's kernels must match the cpu stock results too.
  await startBackend(tf, 'wasm');
  cases.forEach((c, i) => {
    const fast = convGrads(c);
    t.ok(worstArrayDifference(fast[0], stock[i].conv[0]) < 1e-3, `wasm dx ${c.name}`);
    t.ok(worstArrayDifference(fast[1], stock[i].conv[1]) < 1e-3, `wasm dW ${c.name}`);
    t.ok(worstArrayDifference(fusedGrads(c), stock[i].fused) < 1e-3, `wasm fused dW ${c.name}`);
  });
  MM_SHAPES.forEach((shape, s) =>
    FLAGS.forEach(([a, b], i) => {
      const g = matmulGrads(a, b, shape);
      t.ok(worstArrayDifference(g, stockMM[s][i]) < 1e-4, `wasm matmul grads ${shape} transposeA=${a} transposeB=${b}`);
    }),
  );
  await tf.setBackend('cpu');
});
