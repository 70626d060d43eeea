// The native pooling, activation and element-wise kernels against the stock tfjs cpu kernels, bit for bit: MaxPool
// and its gradient, Relu, bias Add, broadcasting arithmetic and comparisons, Sum and Mean.
// Skipped when the addon is not built, unless TANDEM_REQUIRE_NATIVE=1 (CI).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { randomInput, compare, counts, type Input, startNativeAndStock } from './fixtures/native-compare.js';
import { prng } from '../src/data/synthetic-images.js'; // mulberry32, for shapes and values
import {
  MAX_POOL_OF_RELU_KERNEL,
  MAX_POOL_RELU_GRAD_KERNEL,
  recordedWinners,
} from '../src/engine/native/pool-kernels.js';

const addon = await startNativeAndStock();
if (addon) registerTests();

/** A random NHWC shape, window, strides and padding; undefined when a valid window would not fit. */
function randomPool(rand: () => number) {
  const shape = [
    1 + Math.floor(rand() * 3),
    1 + Math.floor(rand() * 9),
    1 + Math.floor(rand() * 9),
    1 + Math.floor(rand() * 5),
  ];
  const filter: [number, number] = [1 + Math.floor(rand() * 3), 1 + Math.floor(rand() * 3)];
  const strides: [number, number] = [1 + Math.floor(rand() * 3), 1 + Math.floor(rand() * 3)];
  const pad: 'same' | 'valid' = rand() < 0.5 ? 'same' : 'valid';
  if (pad === 'valid' && (filter[0] > shape[1] || filter[1] > shape[2])) return undefined;
  return { shape, filter, strides, pad };
}

function registerTests() {
  t.test('MaxPool and its gradient are bit-identical to stock, ties and overlapping windows included', t => {
    const rand = prng(13);
    let matched = 0,
      cases = 0;
    const before = { p: counts('MaxPool').native, g: counts('MaxPoolGrad').native };
    while (cases < 50) {
      const pool = randomPool(rand);
      if (!pool) continue;
      cases++;
      const { shape, filter, strides, pad: p } = pool;
      const x = randomInput(rand, shape, rand() < 0.5); // integer values: many ties
      const name = `x[${shape}] filter ${filter} strides ${strides} ${p}`;
      matched += compare(t, `maxPool ${name}`, [x], a => tf.maxPool(a as tf.Tensor4D, filter, strides, p), {
        exact: true,
      });
      matched += compare(
        t,
        `maxPool gradient ${name}`,
        [x],
        a => {
          const pooled = tf.maxPool(a as tf.Tensor4D, filter, strides, p);
          const weights = tf.sin(tf.range(1, pooled.size + 1)).reshape(pooled.shape); // non-integer: rounding shows
          return tf.grad((v: tf.Tensor) =>
            tf
              .maxPool(v as tf.Tensor4D, filter, strides, p)
              .mul(weights)
              .sum(),
          )(a);
        },
        { exact: true },
      );
    }
    t.equal(matched, cases * 2, `${cases} random pools: values and gradients bit-identical`);
    t.ok(
      counts('MaxPool').native - before.p >= cases && counts('MaxPoolGrad').native - before.g >= cases,
      'they ran natively',
    );
    t.end();
  });

  t.test("TandemMaxPoolReluGrad is MaxPoolGrad then relu's gradient, bit for bit (NaN, -0, gaps, overlaps)", t => {
    const rand = prng(15);
    const specials = [NaN, -0, 0, Infinity, -Infinity];
    let matched = 0,
      cases = 0;
    const before = counts(MAX_POOL_RELU_GRAD_KERNEL).native;
    while (cases < 60) {
      const pool = randomPool(rand);
      if (!pool) continue;
      cases++;
      const { shape, filter, strides, pad } = pool;
      const x = randomInput(rand, shape, rand() < 0.5); // a relu's output has ties at 0; any x must work
      for (let i = 0; i < x.values.length; i++) if (rand() < 0.05) x.values[i] = specials[i % specials.length];
      const attrs = { filterSize: filter, strides, pad };
      const zeros = tf.zeros(shape as [number, number, number, number]) as tf.Tensor4D;
      const probe = tf.maxPool(zeros, filter, strides, pad),
        pooledShape = [...probe.shape];
      tf.dispose([zeros, probe]);
      const dy = randomInput(rand, pooledShape);
      for (let i = 0; i < dy.values.length; i++) if (rand() < 0.05) dy.values[i] = specials[(i + 1) % specials.length];
      matched += compare(
        t,
        `pool ${filter} strides ${strides} ${pad} on x[${shape}]`,
        [x, dy],
        (v, g) => {
          const y = tf.maxPool(v as tf.Tensor4D, filter, strides, pad);
          if (tf.getBackend() === 'native')
            return tf.engine().runKernel(MAX_POOL_RELU_GRAD_KERNEL, { dy: g, input: v, output: y }, attrs) as tf.Tensor;
          const pooled = tf.engine().runKernel('MaxPoolGrad', { dy: g, input: v, output: y }, attrs) as tf.Tensor;
          return pooled.mul(tf.step(v)); // relu's gradient as tfjs computes it
        },
        { exact: true },
      );
    }
    t.equal(matched, cases, `${cases} random pools, specials in x and dy: bit-identical`);
    t.ok(counts(MAX_POOL_RELU_GRAD_KERNEL).native - before >= cases, 'it ran natively');
    // windows that tile x: the gradient reads the winners TandemMaxPoolOfRelu recorded, not x
    let tiled = 0,
      recorded = 0;
    for (let i = 0; i < 30; i++) {
      const f: [number, number] = [1 + Math.floor(rand() * 3), 2 + Math.floor(rand() * 2)]; // 1×1: stock (identity)
      const shape = [
        1 + Math.floor(rand() * 3),
        f[0] * (1 + Math.floor(rand() * 4)),
        f[1] * (1 + Math.floor(rand() * 4)),
      ];
      shape.push(1 + Math.floor(rand() * 20));
      const x = randomInput(rand, shape, rand() < 0.5);
      for (let j = 0; j < x.values.length; j++) if (rand() < 0.05) x.values[j] = specials[j % specials.length];
      const attrs = { filterSize: f, strides: f, pad: 'valid' };
      const ySize = (shape[0] * shape[1] * shape[2] * shape[3]) / (f[0] * f[1]);
      const dy = randomInput(rand, [shape[0], shape[1] / f[0], shape[2] / f[1], shape[3]]);
      for (let j = 0; j < ySize; j++) if (rand() < 0.05) dy.values[j] = specials[(j + 2) % specials.length];
      tiled += compare(
        t,
        `tiling pool ${f} on x[${shape}]`,
        [x, dy],
        (v, g) => {
          if (tf.getBackend() !== 'native') {
            const y = tf.maxPool(v as tf.Tensor4D, f, f, 'valid');
            const pooled = tf.engine().runKernel('MaxPoolGrad', { dy: g, input: v, output: y }, attrs) as tf.Tensor;
            return [y, pooled.mul(tf.step(v))];
          }
          const y = tf.engine().runKernel(MAX_POOL_OF_RELU_KERNEL, { x: v }, attrs) as tf.Tensor;
          if (recordedWinners(y)) recorded++;
          return [
            y,
            tf.engine().runKernel(MAX_POOL_RELU_GRAD_KERNEL, { dy: g, input: v, output: y }, attrs) as tf.Tensor,
          ];
        },
        { exact: true },
      );
    }
    t.equal(tiled, 30, '30 tiling pools: output and gradient from the recorded winners bit-identical to stock');
    t.equal(recorded, 30, 'winners recorded for each');
    t.end();
  });

  t.test(
    'Relu, its gradient, bias Add and leading-axes Sum are bit-identical to stock (NaN, -0, Infinity included)',
    t => {
      const special = new Float32Array([NaN, -0, 0, Infinity, -Infinity, 1e-40, -1e-40, 3, -3]);
      const x: Input = { shape: [3, 3], values: special };
      const dy: Input = { shape: [3, 3], values: new Float32Array([1, -2, 3, NaN, 5, -6, 7, 0, -0]) };
      let matched = 0;
      matched += compare(t, 'relu specials', [x], a => tf.relu(a), { exact: true });
      matched += compare(
        t,
        'relu gradient specials',
        [x, dy],
        (a, g) => tf.grad((v: tf.Tensor) => tf.relu(v).mul(g).sum())(a),
        { exact: true },
      );
      const rand = prng(14);
      for (let i = 0; i < 20; i++) {
        const shape = Array.from({ length: 1 + Math.floor(rand() * 4) }, () => 1 + Math.floor(rand() * 7));
        const a = randomInput(rand, shape),
          v = randomInput(rand, [shape[shape.length - 1]]);
        matched += compare(t, `relu [${shape}]`, [a], z => tf.relu(z), { exact: true });
        matched += compare(t, `add bias [${shape}] + [${v.shape}]`, [a, v], (z, w) => tf.add(z, w), { exact: true });
        matched += compare(t, `add bias reversed`, [v, a], (w, z) => tf.add(w, z), { exact: true });
        const lead = 1 + Math.floor(rand() * shape.length);
        const axes = Array.from({ length: lead }, (_, k) => k);
        matched += compare(t, `sum [${shape}] axes ${axes}`, [a], z => [tf.sum(z, axes), tf.sum(z, axes, true)], {
          exact: true,
        });
      }
      t.equal(matched, 2 + 20 * 4, 'all bit-identical');
      t.ok(
        counts('Relu').native > 0 &&
          counts('TandemReluGrad').native > 0 &&
          counts('Add').native > 0 &&
          counts('Sum').native > 0,
        'they ran natively',
      );
      t.end();
    },
  );

  t.test('broadcasting arithmetic and comparisons, and Sum, Mean over any axes are bit-identical to stock', t => {
    const rand = prng(16);
    const names = [
      'Add',
      'Sub',
      'Multiply',
      'RealDiv',
      'Minimum',
      'Maximum',
      'Greater',
      'GreaterEqual',
      'Less',
      'LessEqual',
      'Equal',
      'Sum',
      'Mean',
    ];
    const before = names.map(k => counts(k).native);
    let matched = 0,
      cases = 0;
    for (; cases < 40; cases++) {
      const shape = Array.from({ length: 1 + Math.floor(rand() * 4) }, () => 1 + Math.floor(rand() * 6));
      // the other operand: a suffix of the shape with some axes set to 1 (numpy broadcasting), either side
      const other = shape.slice(Math.floor(rand() * shape.length)).map(d => (rand() < 0.4 ? 1 : d));
      const a = randomInput(rand, shape, rand() < 0.3),
        b = randomInput(rand, other, rand() < 0.3); // ties: equal elements for the comparisons
      const specials = [NaN, -0, 0, Infinity, -Infinity, 3e38];
      for (const v of [a.values, b.values])
        for (let i = 0; i < v.length; i++) if (rand() < 0.04) v[i] = specials[i % 6];
      const [x, y] = rand() < 0.5 ? [a, b] : [b, a];
      const name = `[${x.shape}] and [${y.shape}]`;
      matched += compare(t, `add ${name}`, [x, y], (p, q) => tf.add(p, q), { exact: true });
      matched += compare(t, `sub ${name}`, [x, y], (p, q) => tf.sub(p, q), { exact: true });
      matched += compare(t, `mul ${name}`, [x, y], (p, q) => tf.mul(p, q), { exact: true });
      matched += compare(t, `div ${name}`, [x, y], (p, q) => tf.div(p, q), { exact: true });
      matched += compare(t, `min, max ${name}`, [x, y], (p, q) => [tf.minimum(p, q), tf.maximum(p, q)], {
        exact: true,
      });
      matched += compare(
        t,
        `comparisons ${name}`,
        [x, y],
        (p, q) => [tf.greater(p, q), tf.greaterEqual(p, q), tf.less(p, q), tf.lessEqual(p, q), tf.equal(p, q)],
        { exact: true },
      );
      const axes = shape.map((_, i) => i).filter(() => rand() < 0.5);
      const reduceOver = axes.length > 0 ? axes : [shape.length - 1];
      matched += compare(
        t,
        `sum [${shape}] axes ${reduceOver}`,
        [a],
        z => [tf.sum(z, reduceOver), tf.sum(z, reduceOver, true)],
        { exact: true },
      );
      matched += compare(
        t,
        `mean [${shape}] axes ${reduceOver}`,
        [a],
        z => [tf.mean(z, reduceOver), tf.mean(z, reduceOver, true)],
        { exact: true },
      );
    }
    matched += compare(
      t,
      'global average pooling and its gradient',
      [randomInput(rand, [4, 6, 6, 8])],
      z => tf.grad(v => tf.mean(v, [1, 2]))(z),
      { exact: true },
    );
    matched += compare(
      t,
      'relu6 and its gradient',
      [randomInput(rand, [3, 5, 5, 4])],
      z => tf.grad(v => tf.minimum(tf.relu(tf.mul(v, 8)), 6))(z),
      { exact: true },
    );
    // tfjs's cpu cast of a bool mask to float32 keeps the mask's Uint8Array: the product still runs natively
    const multipliesBefore = counts('Multiply').native;
    matched += compare(
      t,
      'a float32 tensor times a bool mask cast to float32',
      [randomInput(rand, [3, 4, 4, 5])],
      z => tf.mul(z, tf.cast(tf.greater(z, 0), 'float32')),
      { exact: true },
    );
    t.ok(counts('Multiply').native > multipliesBefore, 'the masked product ran natively');
    t.equal(matched, cases * 8 + 3, `${cases} random shapes: all bit-identical`);
    const ran = names.map((k, i) => counts(k).native - before[i]);
    t.ok(
      ran.every(r => r >= cases),
      `they ran natively (${names.map((k, i) => `${k} ${ran[i]}`).join(', ')})`,
    );
    t.end();
  });
}
