/**
 * `npm run bench -- soak [--steps N]`: a long run of `mlp` on 2 devices; RSS of
 * the process and the tfjs tensor count of every device at the start, the
 * middle and the end (they must stay flat), and any error.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { train } from '../src/index.js';

export interface SoakPoint {
  step: number;
  rssMiB: number;
  tensors: number[];
}

export async function soak(steps: number): Promise<{ points: SoakPoint[]; error?: string }> {
  const marks = new Set([1, Math.floor(steps / 2), steps]);
  const points: SoakPoint[] = [];
  try {
    await train(
      { model: 'mlp', data: 'mnist', devices: 2, batch: 64, steps },
      {
        onStep: m => {
          if (marks.has(m.step))
            points.push({ step: m.step, rssMiB: process.memoryUsage().rss / 2 ** 20, tensors: m.numTensors });
        },
      },
    );
    return { points };
  } catch (err) {
    return { points, error: (err as Error).message };
  }
}

export async function runSoak(steps: number, out: string): Promise<void> {
  const t0 = performance.now();
  const { points, error } = await soak(steps);
  console.log(
    `soak: mlp on mnist, 2 devices, ${steps} steps in ${((performance.now() - t0) / 1000).toFixed(1)} s; error: ` +
      `${error ?? 'none'}`,
  );
  console.log('| step | RSS MiB (main process, all threads) | tfjs tensors per device |\n|---:|---:|---|');
  for (const p of points) console.log(`| ${p.step} | ${p.rssMiB.toFixed(1)} | ${p.tensors.join(', ')} |`);
  mkdirSync(out, { recursive: true });
  writeFileSync(
    `${out}/soak.json`,
    JSON.stringify({ bench: 'soak', date: new Date().toISOString(), steps, points, error }, null, 2),
  );
  console.log(`\nJSON: ${out}/soak.json`);
}
