/**
 * `npm run bench -- onednn-share`: how much of a bf16 training step on one core is oneDNN's primitives, on each side,
 * and so what issue 31's goal (tandem bf16 ≥ 1.2× PyTorch's autocast) leaves for everything else. Both sides link the
 * same oneDNN (Debian's 2.6) and run the same kinds of kernels on the same shapes; what differs is around them.
 *
 * Per model (batch 32, one thread, tandem's native engine against PyTorch 1.13 autocast bf16 channels_last, PyTorch
 * keeping its freed memory): the step time, the median of `repeats` rounds (tandem: the run's `steadyStepMs`;
 * PyTorch: its script's ms a step over the timed steps), and the oneDNN time a step, the sum of `DNNL_VERBOSE=1`'s
 * execution times over the second half of a run of `steps` (its own process on each side). With `--pin` the bench
 * and everything it starts run on one CPU.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { train, type TrainConfig } from '../src/index.js';
import { runRecord } from './run-record.js';
import { allowedCpus, pinTo } from './cpu-pin.js';
import { findTorchPython, runTorchReference, mallocEnv, torchScriptPath, type TorchModel } from './torch-reference.js';
import { median } from './precision-tables.js';
import { INPUT } from './precision.js';

export interface OnednnShareOptions {
  models: string[];
  steps: number;
  repeats: number;
  pin: boolean;
  out: string;
}

const BATCH = 32;
const GOAL = 1.2;
const VERBOSE_OUTPUT_BYTES = 1 << 30;

function config(model: string, steps: number): TrainConfig {
  return {
    model,
    data: 'synthetic-images',
    imageSize: INPUT[model],
    datasetSize: 512,
    classes: 10,
    devices: 1,
    batch: BATCH,
    steps,
    backend: 'native',
    nativeThreads: 1,
    precision: 'bf16',
    optimizer: 'sgd',
    lr: 0.01,
    momentum: 0.9,
  };
}

/** ms a step of oneDNN's primitives over the second half of a run of `steps` whose DNNL_VERBOSE output is `text`. */
function onednnMsPerStep(text: string, steps: number, who: string): number {
  const times = text
    .split('\n')
    .filter(line => /^(onednn|dnnl)_verbose,exec,/.test(line))
    .map(line => Number(line.slice(line.lastIndexOf(',') + 1)));
  if (times.length < steps) throw new Error(`onednn-share: ${who} printed ${times.length} oneDNN executions`);
  const half = times.slice(times.length - Math.floor(times.length / 2));
  return half.reduce((a, b) => a + b, 0) / (steps / 2);
}

/** tandem's oneDNN ms a step: the run in a child process of its own (oneDNN prints to the process's stdout). */
function tandemOnednn(model: string, steps: number): number {
  const cli = fileURLToPath(new URL('../../bin/tandem.js', import.meta.url));
  const [h, w, c] = INPUT[model];
  const args = [cli, 'train', '--model', model, '--data', 'synthetic-images', '--image-size', `${h}x${w}x${c}`];
  args.push('--dataset-size', '512', '--classes', '10', '--devices', '1', '--batch', String(BATCH));
  args.push('--steps', String(steps), '--backend', 'native', '--native-threads', '1', '--precision', 'bf16');
  args.push('--optimizer', 'sgd', '--lr', '0.01', '--momentum', '0.9');
  const r = spawnSync(process.execPath, args, {
    encoding: 'utf8',
    maxBuffer: VERBOSE_OUTPUT_BYTES,
    env: { ...process.env, DNNL_VERBOSE: '1' },
  });
  if (r.status !== 0) throw new Error(`onednn-share: tandem ${model} exited ${r.status}: ${r.stderr.slice(-2000)}`);
  return onednnMsPerStep(r.stdout, steps, `tandem ${model}`);
}

/** PyTorch's oneDNN ms a step: its script under DNNL_VERBOSE=1, `steps` in all. */
function torchOnednn(python: string, model: TorchModel, steps: number): number {
  const half = Math.floor(steps / 2);
  const args = [torchScriptPath(model), '--mode', 'single', '--batch', String(BATCH), '--warmup', String(half)];
  args.push('--steps', String(steps - half), '--threads', '1', '--precision', 'bf16', '--channels-last');
  const r = spawnSync(python, args, {
    encoding: 'utf8',
    maxBuffer: VERBOSE_OUTPUT_BYTES,
    env: { ...process.env, ...mallocEnv('kept'), DNNL_VERBOSE: '1' },
  });
  if (r.status !== 0) throw new Error(`onednn-share: PyTorch ${model} exited ${r.status}: ${r.stderr.slice(-2000)}`);
  return onednnMsPerStep(r.stdout, steps, `PyTorch ${model}`);
}

async function shareRow(python: string, model: string, o: OnednnShareOptions) {
  const tandemSteps: number[] = [];
  const torchSteps: number[] = [];
  const half = Math.floor(o.steps / 2);
  for (let r = 0; r < o.repeats; r++) {
    tandemSteps.push((await train(config(model, o.steps))).steadyStepMs);
    const torch = await runTorchReference(python, {
      mode: 'single',
      model: model as TorchModel,
      batch: BATCH,
      warmup: half,
      steps: o.steps - half,
      threads: 1,
      precision: 'bf16',
      channelsLast: true,
    });
    torchSteps.push(torch.msPerStep);
  }
  const tandemStepMs = median(tandemSteps);
  const torchStepMs = median(torchSteps);
  const tandemOnednnMs = tandemOnednn(model, o.steps);
  const torchOnednnMs = torchOnednn(python, model as TorchModel, o.steps);
  const goalStepMs = torchStepMs / GOAL;
  return {
    model,
    tandemStepMs,
    torchStepMs,
    ratio: torchStepMs / tandemStepMs,
    tandemOnednnMs,
    torchOnednnMs,
    tandemOutsideMs: tandemStepMs - tandemOnednnMs,
    torchOutsideMs: torchStepMs - torchOnednnMs,
    goalStepMs,
    /** What a tandem step at the goal leaves outside oneDNN, its primitives as fast as PyTorch's. */
    goalOutsideMs: goalStepMs - torchOnednnMs,
    tandemStepsMs: tandemSteps,
    torchStepsMs: torchSteps,
  };
}

type Row = Awaited<ReturnType<typeof shareRow>>;

function printRows(rows: Row[]): void {
  const f = (v: number) => v.toFixed(2);
  console.log(
    '\n| model | tandem step | PyTorch step | PyTorch / tandem | oneDNN: tandem | oneDNN: PyTorch | ' +
      `outside: tandem | outside: PyTorch | step at ${GOAL}× | outside at ${GOAL}× |`,
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows)
    console.log(
      `| ${r.model} | ${f(r.tandemStepMs)} | ${f(r.torchStepMs)} | ${r.ratio.toFixed(2)} | ${f(r.tandemOnednnMs)} | ` +
        `${f(r.torchOnednnMs)} | ${f(r.tandemOutsideMs)} | ${f(r.torchOutsideMs)} | ${f(r.goalStepMs)} | ` +
        `${f(r.goalOutsideMs)} |`,
    );
  console.log('(ms a step; "outside at 1.2×": what the goal leaves for all but oneDNN at PyTorch\'s primitive times)');
}

export async function runOnednnShareBench(o: OnednnShareOptions): Promise<void> {
  const python = findTorchPython();
  if (!python) throw new Error('onednn-share: PyTorch is not installed (apt-get install python3-torch)');
  const unknown = o.models.filter(m => !(m in INPUT));
  if (unknown.length) throw new Error(`onednn-share: no input size for ${unknown.join(', ')}`);
  if (o.pin) pinTo([(allowedCpus() ?? [0])[0]]);
  const rows: Row[] = [];
  for (const model of o.models) rows.push(await shareRow(python, model, o));
  printRows(rows);
  const file = path.join(o.out, 'onednn-share.json');
  mkdirSync(o.out, { recursive: true });
  const result = { bench: 'onednn-share', ...runRecord(), date: new Date().toISOString(), options: o, rows };
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`wrote ${file}`);
}
