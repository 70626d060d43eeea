/**
 * What a comm hook costs on this machine's CPU, measured at start for the cost
 * model (a few milliseconds): fp16/bf16 encoding and decoding per float (the
 * hooks' own loops), and PowerSGD's products per multiply-add (its own
 * `multiply` on a 1024 x 1024 matrix, larger than the caches).
 */
import { addDecoded, encodeHalves, packedWords } from '../pipeline/hooks/half-float.js';
import { multiply } from '../pipeline/hooks/low-rank.js';

/** The built-in hooks whose compute the cost model predicts. */
export type CompressionHook = 'fp16' | 'bf16' | 'powersgd';

export interface HookCosts {
  /** fp16/bf16: rounding one float into its code (and what it decodes to). */
  encodeMsPerFloat: number;
  /** fp16/bf16: decoding one code and adding it. */
  decodeMsPerFloat: number;
  /** PowerSGD: one multiply-add of its thin products. */
  macMs: number;
  /** One elementwise pass (a[i] += b[i]): error feedback's corrections and residuals, the mean's division. */
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
  const packed = new Float32Array(packedWords(n)), sent = new Float32Array(n), out = new Float32Array(n);
  const encodeMs = bestOf(4, () => encodeHalves('fp16', values, packed, sent));
  const decodeMs = bestOf(4, () => addDecoded('fp16', packed, out));
  // A 4 MiB matrix, beyond the caches as a large dense kernel's gradient is: with a cache-resident one (256K floats)
  // the hosts bench measured alexnet's PowerSGD steps at 1.3-1.4x their prediction.
  const rows = 1024, cols = 1024, r = 8;
  const m = new Float32Array(rows * cols).map((_, i) => Math.sin(i) * 1e-3), q = new Float32Array(cols * r).fill(0.5), p = new Float32Array(rows * r);
  const mulMs = bestOf(3, () => multiply(m, q, p, rows, cols, r));
  const passMs = bestOf(4, () => { for (let i = 0; i < n; i++) out[i] += sent[i]; });
  return { encodeMsPerFloat: encodeMs / n, decodeMsPerFloat: decodeMs / n, macMs: mulMs / (rows * cols * r), passMsPerFloat: passMs / n };
}
