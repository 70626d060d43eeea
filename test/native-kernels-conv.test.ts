// The native convolutions against the stock tfjs cpu kernels, computed both ways on the same random inputs
// (random shapes, strides, paddings, channel multipliers): Conv2D, FusedConv2D, DepthwiseConv2dNative and their
// backprops.
// Skipped when the addon is not built, unless TANDEM_REQUIRE_NATIVE=1 (CI).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { randomInput, compare, counts, pad, startNativeAndStock } from './fixtures/native-compare.js';
import { prng } from '../src/data/synthetic-images.js'; // mulberry32, for shapes and values

const addon = await startNativeAndStock();
if (addon) registerTests();

function registerTests() {
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
          tf.engine().runKernel(
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
          tf.engine().runKernel(
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
      `most cases ran natively (Conv2D ${ran('Conv2D', before.f)}, backprop input ` +
        `${ran('Conv2DBackpropInput', before.bi)}, filter ${ran('Conv2DBackpropFilter', before.bf)}, fused ` +
        `${ran('FusedConv2D', before.fu)} of ${cases})`,
    );
    t.end();
  });

  t.test(
    'DepthwiseConv2dNative and both of its backprops match stock on random shapes, channel multipliers, strides, ' +
      'paddings',
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
}
