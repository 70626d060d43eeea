// The PowerSGD hook on 2-3 ranks (real worker threads, the shared-memory transport): a mean gradient of rank <= r
// comes back to ~1e-5, the uncompressed variables are the all-reduce's bits, every rank gets the same bits, error
// feedback carries what the approximation left, steps before startStep are the plain all-reduce; the floats sent.
import t from 'tap';
import { reduceSlotsInto } from '../src/collectives/reduce-slots.js';
import { seededNormals } from '../src/pipeline/hooks/low-rank.js';
import { compressibleShape } from '../src/pipeline/hooks/power-sgd.js';
import type { BucketVariable } from '../src/pipeline/comm-hook.js';
import { runCommHook } from './fixtures/run-comm-hook.js';

// A dense kernel [48, 32] (compressed), its bias [32], a conv kernel [3, 3, 4, 16] = [36, 16] (compressed), a small [4,
// 3] (not).
const VARIABLES: BucketVariable[] = [
  { name: 'dense/kernel', shape: [48, 32], offset: 0, size: 1536 },
  { name: 'dense/bias', shape: [32], offset: 1536, size: 32 },
  { name: 'conv/kernel', shape: [3, 3, 4, 16], offset: 1568, size: 576 },
  { name: 'tiny/kernel', shape: [4, 3], offset: 2144, size: 12 },
];
const LENGTH = 2156;

const sameBits = (a: Float32Array, b: Float32Array) =>
  Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

/**
 * Rank `rank`'s gradient: each matrix u vᵀ with its own v per rank and a u shared by all (so the mean has rank 1 per
 * `lowRank` term).
 */
function gradient(rank: number, step: number, lowRank: number): Float32Array {
  const g = new Float32Array(LENGTH);
  seededNormals(1000 + rank * 31 + step, g); // full rank, for the matrices that are not low-rank
  for (const v of VARIABLES) {
    const shape = compressibleShape(v.shape, 2, 2);
    if (!shape || lowRank === 0) continue;
    const m = g.subarray(v.offset, v.offset + v.size);
    m.fill(0);
    for (let k = 0; k < lowRank; k++) {
      const u = new Float32Array(shape.rows),
        w = new Float32Array(shape.cols);
      seededNormals(77 + k, u); // shared by the ranks
      seededNormals(500 + k * 7 + rank * 3 + step * 11, w);
      for (let i = 0; i < shape.rows; i++) for (let j = 0; j < shape.cols; j++) m[i * shape.cols + j] += u[i] * w[j];
    }
  }
  return g;
}

t.test('which variables are compressed: matrices large enough for rank r to pay', async t => {
  t.same(compressibleShape([48, 32], 2, 2), { rows: 48, cols: 32, rank: 2 });
  t.same(compressibleShape([3, 3, 4, 16], 2, 2), { rows: 36, cols: 16, rank: 2 });
  t.equal(compressibleShape([4, 3], 2, 2), undefined);
  t.equal(compressibleShape([32], 2, 2), undefined);
});

// Without error feedback: with it, a step also delivers what earlier steps left (checked in the next test).
t.test(
  'a mean gradient of rank <= r comes back to ~1e-5 (warm start); the rest is the all-reduce, bit for bit; every ' +
    'rank the same bits',
  async t => {
    for (const ranks of [2, 3]) {
      const steps = 3;
      const inputs = Array.from({ length: ranks }, (_, r) =>
        Array.from({ length: steps }, (_, s) => gradient(r, s, 2)),
      );
      const results = await runCommHook('powersgd', inputs, VARIABLES, { rank: 2, startStep: 1, errorFeedback: false });
      for (let s = 0; s < steps; s++) {
        const want = new Float32Array(LENGTH);
        reduceSlotsInto(
          inputs.map(g => g[s]),
          want,
          0,
          LENGTH,
          'mean',
        );
        const got = results[0].outputs[s];
        t.ok(
          results.every(res => sameBits(res.outputs[s], got)),
          `${ranks} ranks, step ${s + 1}: every rank the same bits`,
        );
        for (const v of VARIABLES) {
          const a = got.subarray(v.offset, v.offset + v.size),
            b = want.subarray(v.offset, v.offset + v.size);
          if (compressibleShape(v.shape, 2, 2)) {
            let err = 0,
              scale = 0;
            for (let i = 0; i < v.size; i++) {
              err = Math.max(err, Math.abs(a[i] - b[i]));
              scale = Math.max(scale, Math.abs(b[i]));
            }
            t.ok(
              err / scale < 5e-5,
              `${ranks} ranks, step ${s + 1}, ${v.name}: rank-2 mean reconstructed (relative error ` +
                `${(err / scale).toExponential(2)})`,
            );
          } else {
            t.ok(sameBits(a, b), `${ranks} ranks, step ${s + 1}, ${v.name}: uncompressed, the all-reduce's bits`);
          }
        }
      }
      // P [48x2] + [36x2], Q [32x2] + [16x2], the rest plain (32 + 12)
      t.same(
        results[0].wire,
        Array(steps).fill(96 + 72 + 64 + 32 + 44),
        `${ranks} ranks: ${96 + 72 + 64 + 32 + 44} floats per step handed to the collective (of ${LENGTH})`,
      );
    }
  },
);

t.test(
  'full-rank gradients: error feedback carries what the approximation left; before startStep, the plain all-reduce',
  async t => {
    const ranks = 2,
      steps = 12,
      startStep = 3;
    const inputs = Array.from({ length: ranks }, (_, r) => Array.from({ length: steps }, (_, s) => gradient(r, s, 0)));
    const results = await runCommHook('powersgd', inputs, VARIABLES, { rank: 1, startStep });
    for (let s = 0; s < startStep - 1; s++) {
      const want = new Float32Array(LENGTH);
      reduceSlotsInto(
        inputs.map(g => g[s]),
        want,
        0,
        LENGTH,
        'mean',
      );
      t.ok(
        sameBits(results[0].outputs[s], want) && sameBits(results[1].outputs[s], want),
        `step ${s + 1} < startStep: the all-reduce's bits`,
      );
    }
    const compressed = VARIABLES.filter(v => compressibleShape(v.shape, 1, 2));
    let at = 0,
      worst = 0,
      scale = 0,
      lastStepError = 0;
    for (const v of compressed) {
      for (let i = 0; i < v.size; i++) {
        let want = 0,
          got = 0;
        for (let r = 0; r < ranks; r++) for (let s = 0; s < steps; s++) want += inputs[r][s][v.offset + i] / ranks;
        for (let s = 0; s < steps; s++) got += results[0].outputs[s][v.offset + i];
        for (let r = 0; r < ranks; r++) got += results[r].residual![at + i] / ranks;
        worst = Math.max(worst, Math.abs(got - want));
        scale = Math.max(scale, Math.abs(want));
        const last = (inputs[0][steps - 1][v.offset + i] + inputs[1][steps - 1][v.offset + i]) / 2;
        lastStepError = Math.max(lastStepError, Math.abs(results[0].outputs[steps - 1][v.offset + i] - last));
      }
      at += v.size;
    }
    t.ok(
      lastStepError > 0.1,
      `rank 1 of a full-rank gradient is lossy in one step (max error ${lastStepError.toFixed(3)})`,
    );
    t.ok(
      worst / scale < 1e-5,
      `sum of the means + mean residual = mean of summed gradients (relative error ` +
        `${(worst / scale).toExponential(2)})`,
    );
    t.ok(
      results.every(res => res.outputs.every((o, s) => sameBits(o, results[0].outputs[s]))),
      'every rank the same bits at every step',
    );
  },
);
