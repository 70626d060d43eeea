// The fp16 and bf16 hooks on 2-3 ranks (real worker threads, the shared-memory transport): values representable
// in 16 bits give exactly the all-reduce's mean (bits); any values give the same bits on every rank; error feedback
// carries what was not sent (sum over steps of the means + mean of the final residuals = mean of the summed
// gradients), and without it that sum drifts; half the floats cross the collective; the hook (its per-element passes
// in the native addon when it loads) gives the bits of the JS loops run here in one thread.
import t from 'tap';
import { reduceSlotsInto } from '../src/collectives/reduce-slots.js';
import { halfArithmetic, JS_HALF_ARITHMETIC } from '../src/optim/half-arithmetic.js';
import { packedWords, type HalfFormat } from '../src/pipeline/hooks/half-float.js';
import { runCommHook } from './fixtures/run-comm-hook.js';

const LENGTH = 1001; // odd: the last word holds one code

function gradients(ranks: number, steps: number, value: (r: number, s: number, i: number) => number): Float32Array[][] {
  return Array.from({ length: ranks }, (_, r) =>
    Array.from({ length: steps }, (_, s) => Float32Array.from({ length: LENGTH }, (_, i) => value(r, s, i))),
  );
}

const sameBits = (a: Float32Array, b: Float32Array) =>
  Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

for (const format of ['fp16', 'bf16'] as const) {
  t.test(`${format}: representable values give the all-reduce's mean, bit for bit, on 3 ranks`, async t => {
    for (const ranks of [3]) {
      const steps = 3;
      // k/64 with |k| <= 255: 8 significant bits, exact in fp16 and bf16
      const inputs = gradients(ranks, steps, (r, s, i) => (((i * 37 + r * 101 + s * 13) % 511) - 255) / 64);
      const results = await runCommHook(format, inputs, []);
      for (let s = 0; s < steps; s++) {
        const want = new Float32Array(LENGTH);
        reduceSlotsInto(
          inputs.map(g => g[s]),
          want,
          0,
          LENGTH,
          'mean',
        );
        results.forEach((res, r) =>
          t.ok(sameBits(res.outputs[s], want), `${ranks} ranks, step ${s + 1}, rank ${r}: the all-reduce's bits`),
        );
      }
      t.ok(
        results.every(res => res.residual!.every(v => v === 0)),
        'nothing left in the residuals',
      );
      t.same(
        results[0].wire,
        Array(steps).fill(Math.ceil(LENGTH / 2)),
        `${Math.ceil(LENGTH / 2)} floats handed to the collective per step (of ${LENGTH})`,
      );
    }
  });

  t.test(`${format}: error feedback carries the residual; the same bits on every rank`, async t => {
    const ranks = 2,
      steps = 20;
    const value = (r: number, s: number, i: number) =>
      Math.sin(i * 0.37 + r * 1.3 + s * 0.71) * 1e-3 + Math.cos(i) * 1e-5;
    const inputs = gradients(ranks, steps, value);
    const drift: Record<string, number> = {};
    for (const errorFeedback of [true, false]) {
      const results = await runCommHook(format, inputs, [], { errorFeedback });
      for (let s = 0; s < steps; s++)
        t.ok(
          results.every(res => sameBits(res.outputs[s], results[0].outputs[s])),
          `step ${s + 1}: every rank the same bits`,
        );
      let worst = 0,
        scale = 0;
      for (let i = 0; i < LENGTH; i++) {
        let want = 0,
          got = 0;
        for (let r = 0; r < ranks; r++) for (let s = 0; s < steps; s++) want += inputs[r][s][i] / ranks;
        for (let s = 0; s < steps; s++) got += results[0].outputs[s][i];
        if (errorFeedback) for (let r = 0; r < ranks; r++) got += results[r].residual![i] / ranks;
        worst = Math.max(worst, Math.abs(got - want));
        scale = Math.max(scale, Math.abs(want));
      }
      drift[String(errorFeedback)] = worst / scale;
    }
    t.ok(
      drift.true < 1e-5,
      `with error feedback: sum of means + mean residual = mean of summed gradients (relative error ` +
        `${drift.true.toExponential(2)})`,
    );
    t.ok(drift.false > 10 * drift.true, `without it the sum drifts (relative error ${drift.false.toExponential(2)})`);
  });
}

/** The hook's outputs computed here with the JS loops: each rank's compression (residual carried), the mean of all. */
function jsHookOutputs(
  format: HalfFormat,
  inputs: Float32Array[][],
): { outputs: Float32Array[]; residuals: Float32Array[] } {
  const size = inputs.length,
    words = packedWords(LENGTH),
    steps = inputs[0].length;
  const residuals = inputs.map(() => new Float32Array(LENGTH)),
    outputs: Float32Array[] = [];
  for (let s = 0; s < steps; s++) {
    const gathered = new Float32Array(words * size);
    inputs.forEach((g, r) =>
      JS_HALF_ARITHMETIC.compress(
        format,
        g[s],
        residuals[r],
        new Float32Array(LENGTH),
        new Float32Array(LENGTH),
        gathered.subarray(r * words, (r + 1) * words),
      ),
    );
    const out = new Float32Array(LENGTH);
    JS_HALF_ARITHMETIC.meanDecoded(format, gathered, size, out);
    outputs.push(out);
  }
  return { outputs, residuals };
}

for (const format of ['fp16', 'bf16'] as const) {
  t.test(
    `${format}: the hook on 3 ranks gives the bits of the JS loops (${halfArithmetic('auto').name} passes in the hook)`,
    async t => {
      const ranks = 3,
        steps = 4;
      // magnitudes from 2^-30 to 2^20: fp16 subnormals, values flushed to 0 and saturated at 65504; some ±Infinity
      const value = (r: number, s: number, i: number) =>
        i % 97 === 5
          ? r % 2
            ? -Infinity
            : Infinity
          : Math.sin(i * 1.7 + r * 0.3 + s * 2.1) * 2 ** (((i * 7 + r * 3 + s) % 51) - 30);
      const inputs = gradients(ranks, steps, value);
      const results = await runCommHook(format, inputs, []);
      const want = jsHookOutputs(format, inputs);
      for (let s = 0; s < steps; s++)
        results.forEach((res, r) =>
          t.ok(sameBits(res.outputs[s], want.outputs[s]), `step ${s + 1}, rank ${r}: the JS loops' bits`),
        );
      results.forEach((res, r) =>
        t.ok(sameBits(res.residual!, want.residuals[r]), `rank ${r}: the JS loops' residual`),
      );
    },
  );
}
