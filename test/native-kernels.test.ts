// Every native kernel against the stock tfjs cpu kernel, computed two ways on
// the same random inputs (random shapes, strides, paddings, transposes), the
// gradients of a small network both ways, and the fallbacks: a case the addon
// does not cover runs the stock kernel (counted), never a wrong answer.
// Skipped when the addon is not built, unless TANDEM_REQUIRE_NATIVE=1 (CI).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { startBackend } from '../src/engine/backend.js';
import { nativeAddonOrSkip } from './fixtures/native-addon-or-skip.js';
import type { NativeAddon } from '../src/engine/native/native-addon.js';
import { nativeKernelCounts } from '../src/engine/native/native-backend.js';
import { prng } from '../src/data/synthetic-images.js'; // mulberry32, for shapes and values

const addon = nativeAddonOrSkip();
if (addon) {
  await startBackend(tf, 'native');
  await tf.setBackend('cpu'); // create the stock backend once
  await tf.setBackend('native');
  registerTests(addon);
}

type Values = Float32Array | Int32Array;
interface Input {
  shape: number[];
  values: Values;
  dtype?: 'float32' | 'int32';
}

function randomInput(rand: () => number, shape: number[], ties = false): Input {
  const n = shape.reduce((a, b) => a * b, 1);
  const values = new Float32Array(n);
  for (let i = 0; i < n; i++) values[i] = ties ? Math.floor(rand() * 4) - 2 : rand() * 2 - 1;
  return { shape, values };
}

/** Runs f on tensors made on `backend` from the same inputs; returns every output's values and shape. */
function runOn(backend: 'native' | 'cpu', inputs: Input[], f: (...xs: tf.Tensor[]) => tf.Tensor | tf.Tensor[]) {
  tf.setBackend(backend);
  const xs = inputs.map(i => tf.tensor(i.values, i.shape, i.dtype ?? 'float32'));
  const out = f(...xs);
  const outs = Array.isArray(out) ? out : [out];
  const result = outs.map(o => ({ shape: o.shape, values: o.dataSync().slice() }));
  tf.dispose([...xs, ...outs]);
  tf.setBackend('native');
  return result;
}

function maxRelDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    if ((Number.isNaN(a[i]) && Number.isNaN(b[i])) || a[i] === b[i]) continue; // equal infinities included
    m = Math.max(m, Math.abs(a[i] - b[i]) / Math.max(1, Math.abs(b[i])));
  }
  return m;
}

function identical(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
  return true;
}

/** Compares native and stock; `exact` demands the same bits. Returns how many outputs matched. */
function compare(
  t: Tap,
  name: string,
  inputs: Input[],
  f: (...xs: tf.Tensor[]) => tf.Tensor | tf.Tensor[],
  opts: { exact?: boolean; tol?: number } = {},
) {
  const n = runOn('native', inputs, f),
    s = runOn('cpu', inputs, f);
  let ok = n.length === s.length;
  let worst = 0;
  n.forEach((o, i) => {
    ok &&= o.shape.join() === s[i].shape.join();
    if (opts.exact) ok &&= identical(o.values, s[i].values);
    else worst = Math.max(worst, maxRelDiff(o.values, s[i].values));
  });
  if (!opts.exact) ok &&= worst <= (opts.tol ?? 2e-5);
  if (!ok)
    t.fail(
      `${name}: native differs from stock (worst relative diff ${worst.toExponential(2)}; shapes ${n.map(o => o.shape).join('|')} vs ${s.map(o => o.shape).join('|')})`,
    );
  return ok ? 1 : 0;
}

type Tap = Pick<typeof t, 'fail'>;

function counts(kernel: string) {
  return nativeKernelCounts()[kernel] ?? { native: 0, fallback: 0 };
}

function pad(
  rand: () => number,
): 'same' | 'valid' | number | [[number, number], [number, number], [number, number], [number, number]] {
  const r = rand();
  if (r < 0.35) return 'same';
  if (r < 0.7) return 'valid';
  if (r < 0.85) return Math.floor(rand() * 3);
  return [
    [0, 0],
    [Math.floor(rand() * 3), Math.floor(rand() * 3)],
    [Math.floor(rand() * 3), Math.floor(rand() * 3)],
    [0, 0],
  ];
}

function registerTests(addon: NativeAddon) {
  t.test('Conv2D, FusedConv2D and both conv backprops match stock on random shapes, strides, paddings', t => {
    const rand = prng(11);
    let cases = 0,
      matched = 0;
    const before = {
      f: counts('Conv2D'),
      bi: counts('Conv2DBackpropInput'),
      bf: counts('Conv2DBackpropFilter'),
      fu: counts('FusedConv2D'),
    };
    while (cases < 60) {
      const [n, h, w, c] = [
        1 + Math.floor(rand() * 3),
        1 + Math.floor(rand() * 10),
        1 + Math.floor(rand() * 10),
        1 + Math.floor(rand() * 6),
      ];
      const [kh, kw, oc] = [1 + Math.floor(rand() * 4), 1 + Math.floor(rand() * 4), 1 + Math.floor(rand() * 6)];
      const strides: [number, number] = [1 + Math.floor(rand() * 3), 1 + Math.floor(rand() * 3)];
      const p = pad(rand);
      let outShape: number[];
      try {
        outShape = tf.backend_util.computeConv2DInfo(
          [n, h, w, c],
          [kh, kw, c, oc],
          strides,
          1,
          p,
          typeof p === 'number' ? 'floor' : undefined,
        ).outShape;
      } catch {
        continue;
      }
      if (outShape.some(d => d < 1)) continue;
      cases++;
      const x = randomInput(rand, [n, h, w, c]),
        f = randomInput(rand, [kh, kw, c, oc]),
        dy = randomInput(rand, outShape),
        b = randomInput(rand, [oc]);
      const name = `x[${n},${h},${w},${c}] f[${kh},${kw},${c},${oc}] s${strides} pad ${JSON.stringify(p)}`;
      const rounding = typeof p === 'number' ? ('floor' as const) : undefined;
      matched += compare(t, `conv2d ${name}`, [x, f], (a, k) =>
        tf.conv2d(a as tf.Tensor4D, k as tf.Tensor4D, strides, p, 'NHWC', 1, rounding),
      );
      matched += compare(
        t,
        `Conv2DBackpropInput ${name}`,
        [dy, f],
        (g, k) =>
          tf
            .engine()
            .runKernel(
              'Conv2DBackpropInput',
              { dy: g, filter: k },
              {
                strides,
                pad: p,
                dataFormat: 'NHWC',
                ...(rounding ? { dimRoundingMode: rounding } : {}),
                inputShape: [n, h, w, c],
              },
            ) as tf.Tensor,
      );
      matched += compare(
        t,
        `Conv2DBackpropFilter ${name}`,
        [x, dy],
        (a, g) =>
          tf
            .engine()
            .runKernel(
              'Conv2DBackpropFilter',
              { x: a, dy: g },
              {
                strides,
                pad: p,
                dataFormat: 'NHWC',
                ...(rounding ? { dimRoundingMode: rounding } : {}),
                filterShape: [kh, kw, c, oc],
              },
            ) as tf.Tensor,
      );
      const activation = (['linear', 'relu', 'relu6', 'leakyrelu', 'sigmoid', 'elu'] as const)[Math.floor(rand() * 6)];
      matched += compare(
        t,
        `fused conv2d ${activation} ${name}`,
        [x, f, b],
        (a, k, bias) =>
          tf.fused.conv2d({
            x: a as tf.Tensor4D,
            filter: k as tf.Tensor4D,
            strides,
            pad: p,
            dimRoundingMode: rounding,
            bias,
            activation,
            leakyreluAlpha: 0.3,
          }),
        { tol: 1e-4 },
      );
    }
    t.equal(
      matched,
      cases * 4,
      `${cases} random convolutions: forward, fused forward, backprop input and filter all match stock`,
    );
    const ran = (k: string, b: { native: number }) => counts(k).native - b.native;
    t.ok(
      ran('Conv2D', before.f) > cases / 2 &&
        ran('Conv2DBackpropInput', before.bi) > cases / 2 &&
        ran('Conv2DBackpropFilter', before.bf) > cases / 2 &&
        ran('FusedConv2D', before.fu) > cases / 2,
      `most cases ran natively (Conv2D ${ran('Conv2D', before.f)}, backprop input ${ran('Conv2DBackpropInput', before.bi)}, filter ${ran('Conv2DBackpropFilter', before.bf)}, fused ${ran('FusedConv2D', before.fu)} of ${cases})`,
    );
    t.end();
  });

  t.test(
    'DepthwiseConv2dNative and both of its backprops match stock on random shapes, channel multipliers, strides, paddings',
    t => {
      const rand = prng(13);
      let cases = 0,
        matched = 0;
      const names = [
        'DepthwiseConv2dNative',
        'DepthwiseConv2dNativeBackpropInput',
        'DepthwiseConv2dNativeBackpropFilter',
      ];
      const before = names.map(k => counts(k).native);
      while (cases < 40) {
        const [n, h, w, c] = [
          1 + Math.floor(rand() * 3),
          1 + Math.floor(rand() * 10),
          1 + Math.floor(rand() * 10),
          1 + Math.floor(rand() * 6),
        ];
        const [kh, kw, m] = [1 + Math.floor(rand() * 4), 1 + Math.floor(rand() * 4), 1 + Math.floor(rand() * 3)];
        const s = 1 + Math.floor(rand() * 2); // tfjs's depthwise convolution wants equal strides
        const p = rand() < 0.5 ? ('same' as const) : ('valid' as const);
        let outShape: number[];
        try {
          outShape = tf.backend_util.computeConv2DInfo([n, h, w, c], [kh, kw, c, m], s, 1, p, undefined, true).outShape;
        } catch {
          continue;
        }
        if (outShape.some(d => d < 1)) continue;
        cases++;
        const x = randomInput(rand, [n, h, w, c]),
          f = randomInput(rand, [kh, kw, c, m]),
          dy = randomInput(rand, outShape);
        const name = `x[${n},${h},${w},${c}] f[${kh},${kw},${c},${m}] s${s} ${p}`;
        matched += compare(t, `depthwise ${name}`, [x, f], (a, k) =>
          tf.depthwiseConv2d(a as tf.Tensor4D, k as tf.Tensor4D, s, p),
        );
        matched += compare(
          t,
          `depthwise backprop input ${name}`,
          [dy, f],
          (g, k) =>
            tf
              .engine()
              .runKernel(
                names[1],
                { dy: g, filter: k },
                { strides: s, pad: p, dilations: 1, inputShape: [n, h, w, c] },
              ) as tf.Tensor,
        );
        matched += compare(
          t,
          `depthwise backprop filter ${name}`,
          [x, dy],
          (a, g) =>
            tf
              .engine()
              .runKernel(
                names[2],
                { x: a, dy: g },
                { strides: s, pad: p, dilations: 1, filterShape: [kh, kw, c, m] },
              ) as tf.Tensor,
        );
      }
      t.equal(
        matched,
        cases * 3,
        `${cases} random depthwise convolutions: forward, backprop input and filter match stock`,
      );
      const ran = names.map((k, i) => counts(k).native - before[i]);
      t.ok(
        ran.every(r => r === cases),
        `every case ran on oneDNN (${names.map((k, i) => `${k} ${ran[i]}`).join(', ')} of ${cases})`,
      );
      const dilated = compare(
        t,
        'dilated depthwise',
        [randomInput(rand, [1, 7, 7, 2]), randomInput(rand, [3, 3, 2, 1])],
        (a, k) => tf.depthwiseConv2d(a as tf.Tensor4D, k as tf.Tensor4D, 1, 'same', 'NHWC', 2),
      );
      t.equal(dilated, 1, 'dilation 2 falls back to the stock answer');
      t.end();
    },
  );

  t.test('BatchMatMul and _FusedMatMul match stock: batches, broadcasting, transposes, bias, activations', t => {
    const rand = prng(12);
    const before = { m: counts('BatchMatMul').native, f: counts('_FusedMatMul').native };
    let matched = 0,
      cases = 0;
    while (cases < 50) {
      const [m, k, n] = [1 + Math.floor(rand() * 40), 1 + Math.floor(rand() * 40), 1 + Math.floor(rand() * 40)];
      const ta = rand() < 0.5,
        tb = rand() < 0.5;
      const batchShapes: [number[], number[]][] = [
        [[], []],
        [[3], [3]],
        [
          [2, 3],
          [2, 3],
        ],
        [[4], [1]],
        [[1], [5]],
        [[2, 2], []],
      ];
      const [outerA, outerB] = batchShapes[Math.floor(rand() * batchShapes.length)];
      const a = randomInput(rand, [...outerA, ...(ta ? [k, m] : [m, k])]),
        b = randomInput(rand, [...outerB, ...(tb ? [n, k] : [k, n])]);
      if (outerA.length !== outerB.length) continue; // tf.matMul needs equal ranks
      cases++;
      const name = `a[${a.shape}] b[${b.shape}] tA=${ta} tB=${tb}`;
      matched += compare(t, `matMul ${name}`, [a, b], (x, y) => tf.matMul(x, y, ta, tb));
      const activation = (['linear', 'relu', 'relu6', 'leakyrelu', 'sigmoid', 'elu'] as const)[Math.floor(rand() * 6)];
      const bias = randomInput(rand, [n]);
      matched += compare(
        t,
        `fused matMul ${activation} ${name}`,
        [a, b, bias],
        (x, y, z) =>
          tf.fused.matMul({ a: x, b: y, transposeA: ta, transposeB: tb, bias: z, activation, leakyreluAlpha: 0.1 }),
        { tol: 1e-4 },
      );
    }
    t.equal(matched, 2 * cases, `${cases} random matmuls, plain and fused, match stock`);
    const ranM = counts('BatchMatMul').native - before.m,
      ranF = counts('_FusedMatMul').native - before.f;
    t.ok(ranM >= cases && ranF >= cases / 2, `they ran natively (BatchMatMul ${ranM}, _FusedMatMul ${ranF})`);
    t.end();
  });

  t.test('fused activations keep NaN and infinities where stock keeps them (conv and matmul, every activation)', t => {
    const rand = prng(13);
    const special = (shape: number[]): Input => {
      const input = randomInput(rand, shape);
      const v = input.values as Float32Array;
      for (let i = 0; i < v.length; i += 7) v[i] = [NaN, Infinity, -Infinity, 1e30, -1e30][(i / 7) % 5];
      return input;
    };
    let matched = 0,
      cases = 0;
    for (const activation of ['linear', 'relu', 'relu6', 'leakyrelu', 'sigmoid', 'elu'] as const) {
      const x = special([2, 5, 5, 3]),
        f = randomInput(rand, [2, 2, 3, 4]),
        b = randomInput(rand, [4]);
      matched += compare(
        t,
        `fused conv2d ${activation} with NaN/Inf`,
        [x, f, b],
        (a, k, bias) =>
          tf.fused.conv2d({
            x: a as tf.Tensor4D,
            filter: k as tf.Tensor4D,
            strides: 1,
            pad: 'same',
            bias,
            activation,
            leakyreluAlpha: 0.3,
          }),
        { tol: 1e-4 },
      );
      const a = special([6, 9]),
        w = randomInput(rand, [9, 5]),
        bias = randomInput(rand, [5]);
      matched += compare(
        t,
        `fused matMul ${activation} with NaN/Inf`,
        [a, w, bias],
        (p, q, z) => tf.fused.matMul({ a: p, b: q, bias: z, activation, leakyreluAlpha: 0.1 }),
        { tol: 1e-4 },
      );
      cases += 2;
    }
    t.equal(
      matched,
      cases,
      `${cases} fused kernels with NaN, ±Infinity and huge inputs: NaN exactly where stock has it, the rest equal`,
    );
    t.end();
  });

  t.test('MaxPool and its gradient are bit-identical to stock, ties and overlapping windows included', t => {
    const rand = prng(13);
    let matched = 0,
      cases = 0;
    const before = { p: counts('MaxPool').native, g: counts('MaxPoolGrad').native };
    while (cases < 50) {
      const shape = [
        1 + Math.floor(rand() * 3),
        1 + Math.floor(rand() * 9),
        1 + Math.floor(rand() * 9),
        1 + Math.floor(rand() * 5),
      ];
      const filter: [number, number] = [1 + Math.floor(rand() * 3), 1 + Math.floor(rand() * 3)];
      const strides: [number, number] = [1 + Math.floor(rand() * 3), 1 + Math.floor(rand() * 3)];
      const p = rand() < 0.5 ? 'same' : 'valid';
      if (p === 'valid' && (filter[0] > shape[1] || filter[1] > shape[2])) continue;
      cases++;
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
    t.equal(matched, cases * 8 + 2, `${cases} random shapes: all bit-identical`);
    const ran = names.map((k, i) => counts(k).native - before[i]);
    t.ok(
      ran.every(r => r >= cases),
      `they ran natively (${names.map((k, i) => `${k} ${ran[i]}`).join(', ')})`,
    );
    t.end();
  });

  t.test('cases the addon does not cover fall back to the stock kernel, with the stock answer', t => {
    const rand = prng(15);
    const x = randomInput(rand, [2, 9, 9, 3]),
      f = randomInput(rand, [3, 3, 3, 4]);
    const fallbacks = (k: string) => counts(k).fallback;
    const c0 = fallbacks('Conv2D');
    t.equal(
      compare(t, 'dilated conv', [x, f], (a, k) => tf.conv2d(a as tf.Tensor4D, k as tf.Tensor4D, 1, 'same', 'NHWC', 2)),
      1,
      'dilation 2: stock answer',
    );
    t.ok(fallbacks('Conv2D') > c0, 'dilation 2 fell back');
    const r0 = fallbacks('Relu');
    t.equal(
      compare(
        t,
        'int32 relu',
        [{ shape: [4], values: new Int32Array([-2, -1, 0, 5]), dtype: 'int32' }],
        a => tf.relu(a),
        { exact: true },
      ),
      1,
      'int32 relu: stock answer',
    );
    t.ok(fallbacks('Relu') > r0, 'int32 relu fell back');
    const a = randomInput(rand, [5, 6]),
      b = randomInput(rand, [6, 4]),
      alpha = randomInput(rand, [4]);
    const p0 = fallbacks('_FusedMatMul');
    t.equal(
      compare(t, 'prelu fused matmul', [a, b, alpha], (p, q, w) =>
        tf.fused.matMul({ a: p, b: q, activation: 'prelu', preluActivationWeights: w }),
      ),
      1,
      'prelu: stock answer',
    );
    t.ok(fallbacks('_FusedMatMul') > p0, 'prelu fell back');
    const m0 = fallbacks('BatchMatMul');
    t.equal(
      compare(
        t,
        'two-sided batch broadcast',
        [randomInput(rand, [2, 1, 3, 4]), randomInput(rand, [1, 3, 4, 2])],
        (p, q) => tf.matMul(p, q),
      ),
      1,
      'batch [2,1] x [1,3]: stock answer',
    );
    t.ok(fallbacks('BatchMatMul') > m0, 'two-sided broadcast fell back');
    const s0 = fallbacks('Sum');
    t.equal(
      compare(
        t,
        'int32 sum',
        [{ shape: [3, 2], values: new Int32Array([1, 2, 3, 4, 5, 6]), dtype: 'int32' }],
        z => tf.sum(z, 0),
        { exact: true },
      ),
      1,
      'int32 sum: stock answer',
    );
    t.ok(fallbacks('Sum') > s0, 'int32 sum fell back');
    const a0 = fallbacks('Add');
    t.equal(
      compare(
        t,
        'int32 add',
        [
          { shape: [2], values: new Int32Array([1, 2]), dtype: 'int32' },
          { shape: [2], values: new Int32Array([3, -4]), dtype: 'int32' },
        ],
        (p, q) => tf.add(p, q),
        { exact: true },
      ),
      1,
      'int32 add: stock answer',
    );
    t.ok(fallbacks('Add') > a0, 'int32 add fell back');
    t.end();
  });

  t.test('gradients of a small conv network on native equal the stock cpu gradients', t => {
    const rand = prng(16);
    const x = randomInput(rand, [4, 12, 12, 3]),
      w1 = randomInput(rand, [3, 3, 3, 8]),
      b1 = randomInput(rand, [8]),
      w2 = randomInput(rand, [3, 3, 8, 8]),
      w3 = randomInput(rand, [32, 5]),
      b3 = randomInput(rand, [5]);
    const net = (a: tf.Tensor, k1: tf.Tensor, c1: tf.Tensor, k2: tf.Tensor, k3: tf.Tensor, c3: tf.Tensor) => {
      let h = tf.relu(tf.add(tf.conv2d(a as tf.Tensor4D, k1 as tf.Tensor4D, 1, 'same'), c1));
      h = tf.maxPool(h as tf.Tensor4D, 2, 2, 'valid');
      h = tf.relu(tf.conv2d(h as tf.Tensor4D, k2 as tf.Tensor4D, 2, 'same'));
      h = tf.maxPool(h as tf.Tensor4D, 3, 2, 'same');
      return tf
        .relu(tf.add(tf.matMul(h.reshape([4, -1]), k3), c3))
        .square()
        .sum() as tf.Scalar;
    };
    t.equal(
      compare(t, 'network gradients', [x, w1, b1, w2, w3, b3], (...v) => tf.grads(net)(v), { tol: 1e-4 }),
      1,
      'dx, dW and db of conv(same)+bias+relu, maxpool, strided conv, overlapping maxpool, dense+bias+relu',
    );
    t.end();
  });

  t.test('SharedArrayBuffer-backed tensors are read in place, and the thread count is per thread', t => {
    const rand = prng(17);
    const sab = new SharedArrayBuffer(4 * 2 * 6 * 6 * 2);
    const values = new Float32Array(sab);
    values.set(randomInput(rand, [2, 6, 6, 2]).values);
    const f = randomInput(rand, [3, 3, 2, 3]);
    t.equal(
      compare(t, 'conv on a SAB-backed input', [{ shape: [2, 6, 6, 2], values }, f], (a, k) =>
        tf.conv2d(a as tf.Tensor4D, k as tf.Tensor4D, 1, 'same'),
      ),
      1,
      'same as stock',
    );
    addon.setNumThreads(2);
    t.equal(addon.getNumThreads(), 2, 'two OpenMP threads on this thread');
    t.equal(
      compare(t, 'conv with 2 threads', [{ shape: [2, 6, 6, 2], values }, f], (a, k) =>
        tf.conv2d(a as tf.Tensor4D, k as tf.Tensor4D, 1, 'same'),
      ),
      1,
      'same answer with 2 threads',
    );
    addon.setNumThreads(1);
    t.throws(
      () =>
        addon.conv2dForward(
          new Float32Array(3),
          new Float32Array(1),
          null,
          new Float32Array(1),
          [1, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 1],
          0,
          0,
        ),
      /x holds 3 floats, the kernel needs 4/,
      'a too-short array is a RangeError naming the argument',
    );
    t.end();
  });
}
