// The native matrix products against the stock tfjs cpu kernels on the same random inputs: batches, broadcasting,
// transposes, bias, fused activations (NaN and infinities kept where stock keeps them).
// Skipped when the addon is not built, unless TANDEM_REQUIRE_NATIVE=1 (CI).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { randomInput, compare, counts, type Input, startNativeAndStock } from './fixtures/native-compare.js';
import { prng } from '../src/data/synthetic-images.js'; // mulberry32, for shapes and values

const addon = await startNativeAndStock();
if (addon) registerTests();

function registerTests() {
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
}
