// Which path a bf16 convolution gradient takes on this CPU. The frame (a small "valid" weight gradient as the "same"
// one), the reversed forward (an input gradient as the forward of the turned filter) and im2col (a weight gradient of
// few input channels as matmuls) were measured faster on oneDNN 2.6's AMX kernels and no faster or slower on
// AVX512-BF16 alone (native/src/conv-reversed.cc): each is taken where oneDNN picked AMX for it, and nowhere else.
// test/native-bf16.test.ts checks their results on any bf16 CPU (with TANDEM_BF16_AMX_PATHS=always); this file runs
// without it. Skipped when the addon is not built (failed with TANDEM_REQUIRE_NATIVE=1) or oneDNN has no bf16 kernel.
import t from 'tap';
import * as tf from '@tensorflow/tfjs';
import { startNativeAndStock } from './fixtures/native-compare.js';
import type { NativeAddon } from '../src/engine/native/native-addon.js';

delete process.env.TANDEM_BF16_AMX_PATHS;
const addon = await startNativeAndStock();
if (addon) {
  const support = addon.bf16Support();
  if (support.implementation === '') t.comment(`skipped: oneDNN ${support.isa} has no bf16 matmul (${support.reason})`);
  else registerTests(addon, support.isa.includes('amx'));
}

/** A convolution's forward and both gradients in bf16: the keys and implementations of the primitives it created. */
function gradients(addon: NativeAddon, x: number[], filter: number[], pad: 'same' | 'valid'): [string, string][] {
  const before = new Set(Object.keys(addon.implementations()));
  addon.setPrecision('bf16');
  try {
    tf.tidy(() => {
      const conv = (a: tf.Tensor, w: tf.Tensor) =>
        tf
          .conv2d(a as tf.Tensor4D, w as tf.Tensor4D, 1, pad)
          .square()
          .sum();
      const [dx, dw] = tf.grads(conv)([tf.randomUniform(x, -1, 1), tf.randomUniform(filter, -1, 1)]);
      dx.dataSync();
      dw.dataSync();
    });
  } finally {
    addon.setPrecision('fp32');
  }
  return Object.entries(addon.implementations()).filter(([key]) => !before.has(key) && /^conv[12]:bf16\|/.test(key));
}

function registerTests(addon: NativeAddon, amx: boolean) {
  const where = amx ? 'oneDNN picked AMX' : `no AMX (${addon.bf16Support().isa})`;
  const cases = [
    { name: 'RGB input, 3×3 "same"', x: [2, 16, 16, 3], filter: [3, 3, 3, 8], pad: 'same' as const },
    {
      name: '32 → 32 channels, 3×3 "valid" into 8×8',
      x: [2, 10, 10, 32],
      filter: [3, 3, 32, 32],
      pad: 'valid' as const,
    },
    { name: '16 → 16 channels, 3×3 "same"', x: [2, 8, 8, 16], filter: [3, 3, 16, 16], pad: 'same' as const },
  ];
  for (const c of cases)
    t.test(`${c.name}: the gradients' paths where ${where}`, t => {
      const made = gradients(addon, c.x, c.filter, c.pad);
      const input = made.find(([key]) => key.startsWith('conv1:')),
        weights = made.find(([key]) => key.startsWith('conv2:'));
      if (c.x[3] > 3) t.ok(input, 'an input gradient was created');
      t.ok(weights, 'a weight gradient was created');
      if (input) t.equal(input[1].startsWith('reversed forward+'), amx, `input gradient: ${input[1]}`);
      const other = c.x[3] <= 3 ? 'im2col+' : c.pad === 'valid' ? 'framed+' : undefined;
      if (weights && other) t.equal(weights[1].startsWith(other), amx, `weight gradient: ${weights[1]}`);
      if (weights && !other) t.notOk(/^(im2col|framed)\+/.test(weights[1]), `weight gradient: ${weights[1]}`);
      for (const [, impl] of made) t.match(impl, /bf16/, `bf16 kernel: ${impl}`);
      t.end();
    });
}
