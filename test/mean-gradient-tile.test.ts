// Mean's gradient (src/engine/mean-gradient.ts: the small gradient divided, then broadcast) against tfjs's own
// formula, div(mul(reshape(dy), ones(x.shape)), n), bit for bit on the native and cpu backends, over ranks 1–4, every
// axis set and keepDims, with -0, ±Infinity and NaN in dy; and the native Tile kernel
// (src/engine/native/tile-kernel.ts, which tf.broadcastTo runs) against the stock cpu kernel, bit for bit.
// Skipped when the addon is not built, unless TANDEM_REQUIRE_NATIVE=1 (CI).
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { compare, counts, identical, randomInput, startNativeAndStock } from './fixtures/native-compare.js';
import { prng } from '../src/data/synthetic-images.js';

const addon = await startNativeAndStock();
if (addon) registerTests();

/** Every subset of the axes of a rank-r tensor, as a list (the empty one excluded: tf.mean's null covers all). */
function axisSets(rank: number): number[][] {
  const sets: number[][] = [];
  for (let mask = 1; mask < 1 << rank; mask++) sets.push([...Array(rank).keys()].filter(a => mask & (1 << a)));
  return sets;
}

/** tfjs's Mean gradient, as tfjs-core writes it (gradients/Mean_grad.ts). */
function stockMeanGradient(x: tf.Tensor, dy: tf.Tensor, axes: number[]): tf.Tensor {
  const expanded = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  const n = axes.reduce((p, a) => p * x.shape[a], 1);
  return tf.div(tf.mul(tf.reshape(dy, expanded), tf.ones(x.shape, 'float32')), n);
}

function registerTests() {
  t.test("Mean's gradient gives tfjs's formula's bits on native and cpu", t => {
    const rand = prng(31);
    let cases = 0,
      same = 0;
    for (const backend of ['native', 'cpu'] as const) {
      tf.setBackend(backend);
      for (let rank = 1; rank <= 4; rank++) {
        const shape = Array.from({ length: rank }, () => 1 + Math.floor(rand() * 5));
        for (const axes of axisSets(rank)) {
          for (const keepDims of [false, true]) {
            tf.tidy(() => {
              const x = tf.tensor(randomInput(rand, shape).values, shape);
              const outShape = keepDims
                ? shape.map((d, i) => (axes.includes(i) ? 1 : d))
                : shape.filter((_, i) => !axes.includes(i));
              const dyValues = randomInput(rand, outShape).values.map(v => v * 1e3);
              const specials = [-0, Infinity, -Infinity, NaN];
              specials.forEach((s, i) => i < dyValues.length && (dyValues[i] = s));
              const dy = tf.tensor(dyValues, outShape);
              const got = tf.grad((v: tf.Tensor) => tf.mean(v, axes, keepDims))(x, dy);
              const want = stockMeanGradient(x, dy, axes);
              cases++;
              if (identical(got.dataSync(), want.dataSync()) && got.shape.join() === shape.join()) same++;
              else t.fail(`${backend} [${shape}] axes [${axes}] keepDims ${keepDims}: not tfjs's bits`);
            });
          }
        }
      }
    }
    tf.setBackend('native');
    t.equal(same, cases, `${same} of ${cases} gradients identical`);
    t.ok(cases > 60, 'every axis set of ranks 1-4, both backends');
    t.end();
  });

  t.test('on native the gradient of a global average pool runs the native Tile, not a fallback', t => {
    const before = counts('Tile');
    tf.tidy(() => {
      const x = tf.tensor(randomInput(prng(3), [4, 6, 6, 8]).values, [4, 6, 6, 8]);
      tf.grad((v: tf.Tensor) => tf.sum(tf.mean(v, [1, 2])))(x).dataSync();
    });
    const after = counts('Tile');
    t.equal(after.native - before.native, 1, 'one native Tile');
    t.equal(after.fallback - before.fallback, 0, 'no fallback');
    t.end();
  });

  t.test('Tile and broadcastTo are bit-identical to the stock cpu kernel', t => {
    const rand = prng(37);
    let matched = 0;
    const before = counts('Tile').native;
    for (let c = 0; c < 60; c++) {
      const rank = 1 + Math.floor(rand() * 5);
      const shape = Array.from({ length: rank }, () => 1 + Math.floor(rand() * 4));
      const reps = shape.map(() => 1 + Math.floor(rand() * 3));
      const input = randomInput(rand, shape);
      if (c % 7 === 0) input.values[0] = NaN;
      if (c % 5 === 0) input.values[input.values.length - 1] = -0;
      matched += compare(t, `tile [${shape}] by [${reps}]`, [input], x => tf.tile(x, reps), { exact: true });
      const target = shape.map((d, i) => (d === 1 ? reps[i] : d));
      matched += compare(t, `broadcastTo [${shape}] -> [${target}]`, [input], x => tf.broadcastTo(x, target), {
        exact: true,
      });
    }
    // larger repetitions: the copies double (1, 2, 4, … blocks a call) and the last call copies what remains
    const large: [number[], number[]][] = [
      [[3], [7]],
      [
        [2, 1, 3],
        [5, 6, 1],
      ],
      [
        [1, 2],
        [16, 3],
      ],
      [
        [4, 1, 1, 5],
        [1, 16, 9, 1],
      ],
    ];
    for (const [shape, reps] of large)
      matched += compare(t, `tile [${shape}] by [${reps}]`, [randomInput(rand, shape)], x => tf.tile(x, reps), {
        exact: true,
      });
    t.equal(matched, 124, 'every case identical');
    t.ok(counts('Tile').native > before, 'the native kernel ran');
    t.end();
  });

  t.test('an int32 Tile falls back to the stock kernel, with its answer', t => {
    const before = counts('Tile').fallback;
    const input = { shape: [2, 3], values: new Int32Array([1, -2, 3, 4, 5, -6]), dtype: 'int32' as const };
    t.equal(
      compare(t, 'int32 tile', [input], x => tf.tile(x, [2, 2]), { exact: true }),
      1,
      'stock answer',
    );
    t.ok(counts('Tile').fallback > before, 'int32 fell back');
    t.end();
  });
}
