// The pooling half of conv2dReluMaxPool (native/src/pool.cc, MaxPoolWinnersBf16): over a depthwise 1×1 convolution
// by 1 the convolution's bf16 output is x rounded to bf16 exactly (one product by 1, NaN and ±Infinity
// kept), so each window's result can be written out here: the strict-scan maximum of the four cells (NaN never wins),
// relu of it (+0 for a maximum at or below 0, −Infinity when all four are NaN), its bf16 bits, and the winner (the
// first cell holding the maximum; −2 for a window holding a NaN, −1 for one whose result is −Infinity). Checked for
// channel counts the AVX-512 path takes (16, 32, 64) and those the plain loop takes (8, 24), on values holding NaN,
// ±Infinity, ±0, subnormals (0 in bf16), ties and negatives, and on windows of one value repeated. The gradient
// from those winners, written in bf16 alone, is the float32 gradient's cast.
// Skipped when the addon is not built (failed with TANDEM_REQUIRE_NATIVE=1), or when oneDNN has no bf16 kernel here.
import t from 'tap';
import { awkward, startBf16OrSkip } from './fixtures/bf16-gate.js';
import { identical } from './fixtures/native-compare.js';
import type { NativeAddon, NativeConvShape } from '../src/engine/native/native-addon.js';

const NO_WINNER = -1,
  HOLDS_NAN = -2;

/** x rounded to bf16 as the convolution's input cast rounds it, widened back. */
function roundedToBf16(addon: NativeAddon, x: Float32Array): Float32Array {
  const bits = new Uint16Array(x.length),
    out = new Float32Array(x.length);
  addon.castToBf16(x, bits, 'auto');
  addon.widenBf16(bits, out);
  return out;
}

/** What the kernel must give for 2×2 windows of v ([N, H, W, C], already bf16 values). */
function expected(v: Float32Array, [N, H, W, C]: number[]) {
  const OH = H / 2,
    OW = W / 2;
  const y = new Float32Array(N * OH * OW * C),
    winners = new Int8Array(y.length);
  for (let n = 0; n < N; n++)
    for (let oh = 0; oh < OH; oh++)
      for (let ow = 0; ow < OW; ow++)
        for (let c = 0; c < C; c++) {
          const cells = [0, 1, 2, 3].map(k => v[((n * H + 2 * oh + (k >> 1)) * W + 2 * ow + (k & 1)) * C + c]);
          let m = -Infinity;
          for (const x of cells) if (x > m) m = x;
          const first = cells.findIndex(x => x === m);
          const nans = cells.filter(x => Number.isNaN(x)).length;
          const r = nans === 4 ? -Infinity : m > 0 ? m : 0;
          const at = ((n * OH + oh) * OW + ow) * C + c;
          y[at] = r;
          winners[at] = nans > 0 ? HOLDS_NAN : r === -Infinity ? NO_WINNER : first === -1 ? 3 : first;
        }
  return { y, winners };
}

function registerTests(addon: NativeAddon) {
  t.teardown(() => addon.setPrecision('fp32'));
  for (const C of [16, 32, 64, 8, 24]) {
    t.test(`${C} channels: pooled values, bits and winners as written out`, t => {
      addon.setPrecision('bf16');
      const [N, H, W] = [2, 6, 8];
      const x = awkward(N * H * W * C, C);
      for (let p = 0; p + 1 < N * H * W; p += 7) x.copyWithin((p + 1) * C, p * C, (p + 1) * C); // ties across cells
      // a depthwise 1×1 convolution by 1: each channel its own x (a dense identity would spread NaN·0 across channels)
      const filter = new Float32Array(C).fill(1);
      const shape: NativeConvShape = [N, H, W, C, 1, 1, C, 1, 1, 0, 0, 0, 0, H, W, C];
      const y = new Float32Array((N * H * W * C) / 4),
        bits = new Uint16Array(y.length),
        winners = new Int8Array(y.length);
      addon.conv2dReluMaxPool(x, filter, null, y, bits, winners, shape, [2, 2]);
      const want = expected(roundedToBf16(addon, x), [N, H, W, C]);
      t.ok(identical(y, want.y), 'the pooled values');
      t.ok(
        identical(
          bits,
          new Uint16Array(want.y.buffer).filter((_, i) => i % 2 === 1),
        ),
        "the values' bf16 bits",
      );
      t.ok(identical(winners, want.winners), 'the winners');
      // the gradient from these winners: in bf16 alone (dx null: sixteen channels at a time where C allows) the bits
      // of the float32 path's dx cast
      const dy = awkward(y.length, C + 1),
        pool = [N, H, W, C, 2, 2, 2, 2, 0, 0, H / 2, W / 2];
      const dx = new Float32Array(x.length),
        cast = new Uint16Array(x.length),
        alone = new Uint16Array(x.length).fill(0x5555);
      addon.maxPoolReluGradWinners(dy, null, y, winners, dx, pool);
      addon.castToBf16(dx, cast, 'auto');
      addon.maxPoolReluGradWinners(dy, null, y, winners, null, pool, alone);
      t.ok(identical(alone, cast), "the gradient in bf16 alone: the float32 gradient's cast");
      const kinds = new Set(want.winners);
      t.ok(kinds.has(HOLDS_NAN) && kinds.has(0) && kinds.has(3), `windows of every kind (${[...kinds].sort()})`);
      addon.setPrecision('fp32');
      t.end();
    });
  }
}

const addon = await startBf16OrSkip();
if (addon) registerTests(addon);
