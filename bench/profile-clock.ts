/**
 * `npm run bench -- profile-clock [--models alexnet-mini] [--runs 3] [--busy 2] [--batch 32]`:
 * how much load moves the profiler's verdict. Profiles each model `runs` times
 * on each clock (thread CPU time, wall clock), optionally while `busy` child
 * processes spin on the cores, and prints per clock the spread of the
 * cumulative time shares c(k) across runs, the verdicts and their margins.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { profileModel } from '../src/profiling/profile-model.js';
import { decideAlexNetLike } from '../src/profiling/alexnet-like.js';
import type { ClockKind } from '../src/profiling/layer-clock.js';
import { train } from '../src/index.js';
import type { LayerCost } from '../src/profiling/layer-profile.js';

export interface ProfileClockOptions {
  models: string[];
  runs: number;
  busy: number;
  perDeviceBatch: number;
  out: string;
}

const CLOCKS: ClockKind[] = ['thread-cpu', 'wall'];

function cumulativeShares(layers: readonly LayerCost[]): number[] {
  const total = layers.reduce((s, l) => s + l.forwardMs + l.backwardMs, 0);
  let c = 0;
  return layers.map(l => (c += l.forwardMs + l.backwardMs) / total);
}

export async function runProfileClockBench(opts: ProfileClockOptions): Promise<void> {
  const busy: ChildProcess[] = Array.from({ length: opts.busy }, () =>
    spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }),
  );
  const rows: Record<string, unknown>[] = [];
  try {
    console.log(
      `| model | clock | busy loops | load (1 min) | max spread of c(k), points | verdicts | margins, points ` +
        `|\n|---|---|---:|---:|---:|---|---|`,
    );
    for (const model of opts.models) {
      for (const clock of CLOCKS) {
        const shares: number[][] = [],
          verdicts: boolean[] = [],
          margins: (number | null)[] = [];
        for (let r = 0; r < opts.runs; r++) {
          const profile = await profileModel(
            { model, data: 'synthetic-images', devices: 2, batch: 2 * opts.perDeviceBatch },
            train,
            { calibrate: false, clock },
          );
          const v = decideAlexNetLike(profile.layers);
          shares.push(cumulativeShares(profile.layers));
          verdicts.push(v.alexnetLike);
          margins.push(v.margin.time);
        }
        const spread = Math.max(
          ...shares[0].map((_, k) => Math.max(...shares.map(c => c[k])) - Math.min(...shares.map(c => c[k]))),
        );
        const load = os.loadavg()[0];
        const fmt = (m: number | null) => (m === null ? 'none' : (m * 100).toFixed(1));
        console.log(
          `| ${model} | ${clock} | ${opts.busy} | ${load.toFixed(1)} | ${(spread * 100).toFixed(1)} | ` +
            `${verdicts.map(v => (v ? 'like' : 'not')).join(', ')} | ${margins.map(fmt).join(', ')} |`,
        );
        rows.push({
          model,
          clock,
          busy: opts.busy,
          load,
          spreadPoints: spread * 100,
          verdicts,
          marginPoints: margins.map(m => (m === null ? null : m * 100)),
        });
      }
    }
  } finally {
    for (const child of busy) child.kill();
  }
  mkdirSync(opts.out, { recursive: true });
  writeFileSync(
    `${opts.out}/profile-clock.json`,
    JSON.stringify({ bench: 'profile-clock', date: new Date().toISOString(), options: opts, rows }, null, 2),
  );
  console.log(`\nJSON: ${opts.out}/profile-clock.json`);
}
