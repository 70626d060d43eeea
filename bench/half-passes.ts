/**
 * `npm run bench -- half-passes [--runs N] [--floats N]`: the fp16/bf16 hooks' per-element passes on one comm thread,
 * JavaScript against the native addon (the same bits, test/half-float.test.ts): the compression without and with
 * error feedback, and the mean of 2 and 4 ranks' codes, over alexnet-mini's gradient (586K floats by default);
 * median ms of `runs` repeats after one warm-up. Table on stdout, JSON in bench/results/half-passes.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { JS_HALF_ARITHMETIC, nativeHalfArithmetic, type HalfArithmetic } from '../src/optim/half-arithmetic.js';
import { loadNativeAddon } from '../src/engine/native/native-addon.js';
import { packedWords, type HalfFormat } from '../src/pipeline/hooks/half-float.js';

export interface HalfPassesOptions {
  runs: number;
  floats: number;
  out: string;
}

interface Row {
  format: HalfFormat;
  pass: string;
  jsMs: number;
  nativeMs?: number;
}

function median(run: () => void, runs: number): number {
  run();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    run();
    times.push(performance.now() - t0);
  }
  return times.sort((a, b) => a - b)[Math.floor(runs / 2)];
}

/** The passes of one implementation over n floats: name → median ms. */
function timePasses(arithmetic: HalfArithmetic, format: HalfFormat, n: number, runs: number): Map<string, number> {
  const gradient = Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37) * 10 ** ((i % 7) - 6));
  const residual = Float32Array.from({ length: n }, (_, i) => Math.cos(i) * 1e-7);
  const corrected = new Float32Array(n),
    sent = new Float32Array(n),
    out = new Float32Array(n),
    words = packedWords(n);
  const gathered = new Float32Array(words * 4);
  for (let r = 0; r < 4; r++)
    JS_HALF_ARITHMETIC.compress(
      format,
      gradient.map(v => v * (r + 1)),
      undefined,
      corrected,
      sent,
      gathered.subarray(r * words, (r + 1) * words),
    );
  const packed = new Float32Array(words);
  return new Map([
    [
      'compress, no error feedback',
      median(() => arithmetic.compress(format, gradient, undefined, corrected, sent, packed), runs),
    ],
    [
      'compress with error feedback',
      median(() => arithmetic.compress(format, gradient, residual, corrected, sent, packed), runs),
    ],
    ['mean of 2 ranks', median(() => arithmetic.meanDecoded(format, gathered.subarray(0, 2 * words), 2, out), runs)],
    ['mean of 4 ranks', median(() => arithmetic.meanDecoded(format, gathered, 4, out), runs)],
  ]);
}

export function runHalfPassesBench(opts: HalfPassesOptions): void {
  const load = loadNativeAddon();
  console.log(
    `half-passes bench: the fp16/bf16 hooks' passes over ${opts.floats} floats, median of ${opts.runs}; ` +
      `${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(1)}` +
      (load.loaded ? '' : `; native skipped: ${load.reason}`),
  );
  const rows: Row[] = [];
  for (const format of ['fp16', 'bf16'] as const) {
    const js = timePasses(JS_HALF_ARITHMETIC, format, opts.floats, opts.runs);
    const native = load.loaded ? timePasses(nativeHalfArithmetic(), format, opts.floats, opts.runs) : undefined;
    for (const [pass, jsMs] of js) rows.push({ format, pass, jsMs, nativeMs: native?.get(pass) });
  }
  console.log('\n| format | pass | JavaScript ms | native ms | speed-up |\n|---|---|---:|---:|---:|');
  for (const r of rows) {
    console.log(
      `| ${r.format} | ${r.pass} | ${r.jsMs.toFixed(2)} | ${r.nativeMs?.toFixed(2) ?? '-'} | ` +
        `${r.nativeMs ? (r.jsMs / r.nativeMs).toFixed(1) + 'x' : '-'} |`,
    );
  }
  mkdirSync(opts.out, { recursive: true });
  const file = path.join(opts.out, 'half-passes.json');
  writeFileSync(
    file,
    JSON.stringify(
      { bench: 'half-passes', date: new Date().toISOString(), options: opts, cores: os.cpus().length, rows },
      null,
      2,
    ) + '\n',
  );
  console.log(`wrote ${file}`);
}
