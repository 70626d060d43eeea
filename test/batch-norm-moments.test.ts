// BatchNormalization's statistics on the native loops under precision bf16 (src/engine/batch-norm-loops.ts): channels
// last, one pass sums x and x², and Σ(x − mean)² follows from the two sums in double; against the same sums taken
// directly in double, on values far from zero (where one-pass variance loses digits first) and a constant channel
// (never negative). In fp32, and with the channels not last, the loops keep tfjs's two passes: the JS loops' bits.
import t from 'tap';
import { startBf16OrSkip } from './fixtures/bf16-gate.js';
import { prng } from '../src/data/synthetic-images.js';
import { JS_BATCH_NORM_LOOPS, nativeBatchNormLoops, type ChannelGeometry } from '../src/engine/batch-norm-loops.js';

const addon = await startBf16OrSkip();
if (addon) {
  const loops = nativeBatchNormLoops(addon);
  const rand = prng(11);
  /** outer × channels values: channel c around 10^c (c = 0..3), channel 4 constant. */
  const values = (outer: number, channels: number) =>
    Float32Array.from({ length: outer * channels }, (_, i) =>
      i % channels === 4 ? 7.25 : 10 ** (i % channels) * (1 + 0.01 * (rand() - 0.5)),
    );
  const statistics = (x: Float32Array, g: ChannelGeometry) => {
    const sums = loops.channelSums(x, g);
    const mean = Float32Array.from(sums, s => s / (g.outer * g.inner));
    return { sums, mean, squares: loops.centeredSquareSums(x, mean, g) };
  };

  t.test('bf16, channels last: Σx and Σ(x − mean)² from one pass, as the direct double sums', t => {
    const g = { outer: 3000, channels: 6, inner: 1 };
    const x = values(g.outer, g.channels);
    addon.setPrecision('bf16');
    try {
      const { sums, mean, squares } = statistics(x, g);
      for (let c = 0; c < g.channels; c++) {
        let s = 0,
          q = 0;
        for (let o = 0; o < g.outer; o++) s += x[o * g.channels + c];
        for (let o = 0; o < g.outer; o++) q += (x[o * g.channels + c] - mean[c]) ** 2;
        t.equal(sums[c], s, `channel ${c}: Σx in row order, the same bits`);
        t.ok(squares[c] >= 0, `channel ${c}: Σ(x − mean)² is not negative`);
        const err = Math.abs(squares[c] - q) / Math.max(q, 1e-300);
        t.ok(c === 4 ? squares[c] < 1e-6 : err < 1e-6, `channel ${c}: Σ(x − mean)² ${squares[c]} against ${q}`);
      }
    } finally {
      addon.setPrecision('fp32');
    }
    t.end();
  });

  t.test("fp32, and bf16 with the channels not last: tfjs's two passes, the JS loops' bits", t => {
    for (const [precision, g] of [
      ['fp32', { outer: 500, channels: 6, inner: 1 }],
      ['bf16', { outer: 40, channels: 6, inner: 9 }],
    ] as const) {
      const x = values(g.outer * g.inner, g.channels);
      addon.setPrecision(precision);
      try {
        const native = statistics(x, g);
        const sums = JS_BATCH_NORM_LOOPS.channelSums(x, g);
        const js = JS_BATCH_NORM_LOOPS.centeredSquareSums(x, native.mean, g);
        t.same(native.sums, sums, `${precision}, inner ${g.inner}: Σx`);
        t.same(native.squares, js, `${precision}, inner ${g.inner}: Σ(x − mean)², each square in float32`);
      } finally {
        addon.setPrecision('fp32');
      }
    }
    t.end();
  });

  t.test('the one-pass sums serve only the call that follows them on the same x', t => {
    const g = { outer: 300, channels: 6, inner: 1 };
    const x = values(g.outer, g.channels);
    addon.setPrecision('bf16');
    loops.channelSums(x, g); // one-pass sums kept for x; then fp32 sums x again, its two passes
    addon.setPrecision('fp32');
    const { mean, squares } = statistics(x, g);
    t.same(squares, JS_BATCH_NORM_LOOPS.centeredSquareSums(x, mean, g), "fp32's two passes, the JS loops' bits");
    t.throws(
      () => addon.bnChannelMoments(x, 30, g.channels, 10, new Float64Array(2 * g.channels)),
      /inner must be 1/,
      'the addon refuses channels that are not last',
    );
    t.end();
  });
}
