/**
 * PyTorch reference numbers for the benches: runs bench/torch/alexnet_mini.py (the same
 * alexnet-mini, 32x32x3 images, SGD lr 0.01 momentum 0.9, on synthetic data) in a Python that
 * has torch, one process ('single') or several under DistributedDataParallel with gloo ('ddp'),
 * and returns its ms per step and samples/s.
 *
 * `npm run bench -- kernels` and `npm run bench -- scaling` call it; their torch column appears
 * only where {@link findTorchPython} finds a Python for which `python3 -c "import torch"` works
 * (TANDEM_TORCH_PYTHON, then `python3`, then `/usr/bin/python3`), and is simply left out elsewhere.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface TorchStepResult {
  mode: 'single' | 'ddp';
  torch: string;
  threads: number;
  batch: number;
  steps: number;
  procs?: number;
  msPerStep: number;
  medianMsPerStep: number;
  samplesPerSecond: number;
}

export interface TorchReferenceOptions {
  mode: 'single' | 'ddp';
  /** Samples per process per step. */
  batch: number;
  /** Timed steps. */
  steps: number;
  /** Untimed steps first (the script's default: 10). */
  warmup?: number;
  /** torch threads per process (the script's default: 1). */
  threads?: number;
  /** Processes, ddp only (the script's default: 2). */
  procs?: number;
  /** The child is killed after this long (default 300 s). */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 300_000;
const PROBE_TIMEOUT_MS = 20_000; // importing torch takes a second or two on a cold cache
const STDERR_TAIL_LINES = 20;

/**
 * The script's path. The compiled module lives at dist/bench/torch-reference.js and the script is
 * not copied into dist/, so it is two levels up; the second candidate serves a run from the source.
 */
export function torchScriptPath(): string {
  const candidates = [
    new URL('../../bench/torch/alexnet_mini.py', import.meta.url),
    new URL('./torch/alexnet_mini.py', import.meta.url),
  ].map(u => fileURLToPath(u));
  return candidates.find(p => existsSync(p)) ?? candidates[0];
}

/** The first Python that can `import torch`: TANDEM_TORCH_PYTHON, `python3`, `/usr/bin/python3`. */
export function findTorchPython(): string | undefined {
  const candidates = [process.env.TANDEM_TORCH_PYTHON, 'python3', '/usr/bin/python3']
    .filter((c): c is string => c !== undefined && c.trim() !== '');
  for (const python of new Set(candidates)) {
    const probe = spawnSync(python, ['-c', 'import torch'], { stdio: 'ignore', timeout: PROBE_TIMEOUT_MS });
    if (probe.error === undefined && probe.status === 0) return python;
  }
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Checks the script's JSON line; returns a description of what is wrong, or the result. */
function validateResult(value: unknown, options: TorchReferenceOptions): TorchStepResult | string {
  if (!isRecord(value)) return 'not a JSON object';
  const { mode, torch, threads, batch, steps, procs, msPerStep, medianMsPerStep, samplesPerSecond } = value;
  if (mode !== 'single' && mode !== 'ddp') return `bad "mode": ${JSON.stringify(mode)}`;
  if (mode !== options.mode) return `"mode" is ${mode}, ${options.mode} was asked for`;
  if (typeof torch !== 'string' || torch === '') return `bad "torch": ${JSON.stringify(torch)}`;
  const counts = { threads, batch, steps };
  for (const [name, v] of Object.entries(counts)) {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) return `bad "${name}": ${JSON.stringify(v)}`;
  }
  const rates = { msPerStep, medianMsPerStep, samplesPerSecond };
  for (const [name, v] of Object.entries(rates)) {
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) return `bad "${name}": ${JSON.stringify(v)}`;
  }
  if (batch !== options.batch || steps !== options.steps) {
    return `ran batch ${String(batch)} x ${String(steps)} steps, batch ${options.batch} x ${options.steps} was asked for`;
  }
  const result: TorchStepResult = {
    mode,
    torch,
    threads: threads as number,
    batch: batch as number,
    steps: steps as number,
    msPerStep: msPerStep as number,
    medianMsPerStep: medianMsPerStep as number,
    samplesPerSecond: samplesPerSecond as number,
  };
  if (mode === 'ddp') {
    if (typeof procs !== 'number' || !Number.isInteger(procs) || procs < 1) return `bad "procs": ${JSON.stringify(procs)}`;
    result.procs = procs;
  }
  return result;
}

function checkCount(name: string, value: number | undefined, min: number): void {
  if (value !== undefined && (!Number.isInteger(value) || value < min)) {
    throw new RangeError(`runTorchReference: ${name} must be an integer >= ${min}, got ${value}`);
  }
}

/**
 * Runs the PyTorch reference with `python` (see {@link findTorchPython}); its stderr is forwarded
 * line by line as "  torch: ..." and its last stdout line is the result. Rejects, naming the command,
 * the exit code or signal and the tail of stderr, if it fails, prints no valid result or runs too long.
 */
export function runTorchReference(python: string, options: TorchReferenceOptions): Promise<TorchStepResult> {
  checkCount('batch', options.batch, 1);
  checkCount('steps', options.steps, 1);
  checkCount('warmup', options.warmup, 0);
  checkCount('threads', options.threads, 1);
  checkCount('procs', options.procs, 1);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!(timeoutMs > 0)) throw new RangeError(`runTorchReference: timeoutMs must be > 0, got ${timeoutMs}`);

  const args = [torchScriptPath(), '--mode', options.mode, '--batch', String(options.batch), '--steps', String(options.steps)];
  if (options.warmup !== undefined) args.push('--warmup', String(options.warmup));
  if (options.threads !== undefined) args.push('--threads', String(options.threads));
  if (options.mode === 'ddp') {
    if (options.procs !== undefined) args.push('--procs', String(options.procs));
    // the script's own ddp deadline fires first, so it can still stop its ranks and say why
    const scriptTimeoutS = timeoutMs >= 30_000 ? timeoutMs / 1000 - 10 : (timeoutMs * 0.8) / 1000;
    args.push('--timeout', String(Math.max(1, Math.floor(scriptTimeoutS))));
  }
  const command = [python, ...args].join(' ');

  return new Promise<TorchStepResult>((resolve, reject) => {
    const child = spawn(python, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, PYTHONUNBUFFERED: '1' },
    });
    let stdout = '';
    let stderrPartial = '';
    const stderrTail: string[] = [];
    let timedOut = false;
    let settled = false;
    let killTimer: NodeJS.Timeout | undefined;

    const forward = (line: string): void => {
      process.stderr.write(`  torch: ${line}\n`);
      stderrTail.push(line);
      if (stderrTail.length > STDERR_TAIL_LINES) stderrTail.shift();
    };
    const fail = (why: string): void => {
      if (settled) return;
      settled = true;
      const tail = stderrTail.length > 0 ? `\n--- stderr (last ${stderrTail.length} lines) ---\n${stderrTail.join('\n')}` : '';
      reject(new Error(`torch reference failed: ${why}\n  command: ${command}${tail}`));
    };

    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM'); // the script then stops its ddp ranks
      killTimer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      killTimer.unref();
    }, timeoutMs);

    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => { stdout += chunk; });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      const lines = (stderrPartial + chunk).split('\n');
      stderrPartial = lines.pop() ?? '';
      for (const line of lines) forward(line.replace(/\r$/, ''));
    });

    child.on('error', err => {
      clearTimeout(timer);
      if (killTimer !== undefined) clearTimeout(killTimer);
      fail(`could not run ${python}: ${err.message}`);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (killTimer !== undefined) clearTimeout(killTimer);
      if (stderrPartial !== '') forward(stderrPartial);
      stderrPartial = '';
      if (timedOut) return fail(`timed out after ${timeoutMs / 1000} s (killed; exit ${code ?? signal})`);
      if (code !== 0) return fail(signal !== null ? `killed by ${signal}` : `exit code ${code}`);
      const lines = stdout.split('\n').map(l => l.trim()).filter(l => l !== '');
      const last = lines.at(-1);
      if (last === undefined) return fail('exit code 0 but nothing on stdout');
      let parsed: unknown;
      try {
        parsed = JSON.parse(last);
      } catch {
        return fail(`last stdout line is not JSON: ${last.slice(0, 200)}`);
      }
      const result = validateResult(parsed, options);
      if (typeof result === 'string') return fail(`bad result (${result}): ${last.slice(0, 300)}`);
      settled = true;
      resolve(result);
    });
  });
}
