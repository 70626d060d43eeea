/**
 * What a comm hook costs on this machine's CPU, measured at start for the cost
 * model (a few milliseconds): fp16/bf16 compression and decoding per float (the
 * hooks' own passes, as they will run: in the native addon when it loads), and
 * PowerSGD's products per multiply-add (its own `multiply` on a 1024 x 1024
 * matrix, larger than the caches).
 */
import { packedWords } from '../pipeline/hooks/half-float.js';
import { halfArithmetic } from '../optim/half-arithmetic.js';
import { multiply } from '../pipeline/hooks/low-rank.js';

/** The built-in hooks whose compute the cost model predicts. */
export type CompressionHook = 'fp16' | 'bf16' | 'powersgd';

export interface HookCosts {
  /**
   * fp16/bf16: compressing one float with error feedback (gradient + residual, its code, what that decodes to, the new
   * residual).
   */
  encodeMsPerFloat: number;
  /** fp16/bf16: decoding one rank's code and adding it (the mean's division included). */
  decodeMsPerFloat: number;
  /** PowerSGD: one multiply-add of its thin products. */
  macMs: number;
  /** One elementwise pass (a[i] += b[i]): PowerSGD's residuals. */
  passMsPerFloat: number;
  /**
   * Per hook: its real exchange on this model's gradient, timed at start, over what the rates above predict for it
   * (hook-calibration.ts): cache misses on a large gradient, passes the rates leave out. Absent: 1.
   */
  scale?: Partial<Record<CompressionHook, number>>;
}

function bestOf(reps: number, run: () => void): number {
  let best = Infinity;
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    run();
    best = Math.min(best, performance.now() - t0);
  }
  return best;
}

/** Times the hooks' kernels (best of 3, after one warm-up). */
export function measureHookCosts(): HookCosts {
  const n = 1 << 18;
  const values = new Float32Array(n).map((_, i) => Math.sin(i) * 1e-3);
  const words = packedWords(n),
    gathered = new Float32Array(2 * words),
    half = halfArithmetic('auto');
  const residual = new Float32Array(n),
    corrected = new Float32Array(n),
    sent = new Float32Array(n),
    out = new Float32Array(n);
  half.compress('fp16', values, undefined, corrected, sent, gathered.subarray(words)); // a second rank's codes
  const encodeMs = bestOf(4, () =>
    half.compress('fp16', values, residual, corrected, sent, gathered.subarray(0, words)),
  );
  const decodeMs = bestOf(4, () => half.meanDecoded('fp16', gathered, 2, out)) / 2;
  // A 4 MiB matrix, beyond the caches as a large dense kernel's gradient is: with a cache-resident one (256K floats)
  // the hosts bench measured alexnet's PowerSGD steps at 1.3-1.4x their prediction.
  const rows = 1024,
    cols = 1024,
    r = 8;
  const m = new Float32Array(rows * cols).map((_, i) => Math.sin(i) * 1e-3),
    q = new Float32Array(cols * r).fill(0.5),
    p = new Float32Array(rows * r);
  const mulMs = bestOf(3, () => multiply(m, q, p, rows, cols, r));
  const passMs = bestOf(4, () => {
    for (let i = 0; i < n; i++) out[i] += sent[i];
  });
  return {
    encodeMsPerFloat: encodeMs / n,
    decodeMsPerFloat: decodeMs / n,
    macMs: mulMs / (rows * cols * r),
    passMsPerFloat: passMs / n,
  };
}
