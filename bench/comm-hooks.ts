/**
 * `npm run bench -- comm-hooks [--steps N] [--batch N]`: MNIST with each
 * communication hook against the uncompressed all-reduce — held-out accuracy
 * (the hooks must stay within 0.5 points), floats and bytes each rank hands
 * its gradient collective per step (measured by the comm threads), and step
 * time. Table on stdout, JSON in bench/results/comm-hooks.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { train, type TrainConfig } from '../src/index.js';

export interface CommHooksBenchOptions {
  steps: number;
  batch: number;
  devices: number;
  out: string;
}

export async function runCommHooksBench(opts: CommHooksBenchOptions): Promise<void> {
  const base: TrainConfig = {
    model: 'mlp',
    data: 'mnist',
    devices: opts.devices,
    batch: opts.batch,
    steps: opts.steps,
    backend: 'cpu',
    seed: 11,
    lr: 0.05,
    heldOut: 2000,
    evalSamples: 2000,
  };
  const variants: { label: string; config: TrainConfig }[] = [
    { label: 'none (all-reduce)', config: {} },
    { label: 'fp16', config: { commHook: 'fp16' } },
    { label: 'bf16', config: { commHook: 'bf16' } },
    { label: 'powersgd (defaults: r=8, start step 10)', config: { commHook: 'powersgd' } },
    { label: 'powersgd r=4', config: { commHook: 'powersgd', commHookOptions: { rank: 4, startStep: 10 } } },
  ];
  console.log(
    `comm-hooks bench: mlp on MNIST (8000 train, 2000 held out), ${opts.devices} devices, global batch ` +
      `${opts.batch}, ${opts.steps} steps, sgd lr 0.05, cpu backend`,
  );
  console.log(
    '| hook | held-out accuracy | Δ vs none (points) | floats per step per rank | bytes per step per rank | vs none ' +
      '| mean step ms |\n|---|---:|---:|---:|---:|---:|---:|',
  );
  const rows: Record<string, unknown>[] = [];
  let reference: { accuracy: number; bytes: number } | undefined;
  for (const v of variants) {
    const s = await train({ ...base, ...v.config });
    const accuracy = s.heldOut!.accuracy,
      bytes = s.wire.bytesPerStep;
    reference ??= { accuracy, bytes };
    const delta = 100 * (accuracy - reference.accuracy);
    rows.push({
      hook: v.label,
      accuracy,
      deltaPoints: delta,
      floatsPerStep: s.wire.floatsPerStep,
      bytesPerStep: bytes,
      bytesRatio: bytes / reference.bytes,
      meanStepMs: s.meanStepMs,
      parameters: s.parameters,
    });
    console.log(
      `| ${v.label} | ${(100 * accuracy).toFixed(2)}% | ${delta >= 0 ? '+' : ''}${delta.toFixed(2)} | ` +
        `${s.wire.floatsPerStep.toFixed(0)} | ${bytes.toFixed(0)} | ${(bytes / reference.bytes).toFixed(3)} | ` +
        `${s.meanStepMs.toFixed(1)} |`,
    );
  }
  mkdirSync(opts.out, { recursive: true });
  const file = path.join(opts.out, 'comm-hooks.json');
  writeFileSync(
    file,
    JSON.stringify({ bench: 'comm-hooks', date: new Date().toISOString(), options: opts, rows }, null, 2) + '\n',
  );
  console.log(`wrote ${file}`);
}
