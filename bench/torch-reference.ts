/**
 * PyTorch reference numbers for the benches: runs bench/torch/<model>.py (the same network as
 * tandem's builtin of that name, 32x32x3 images (alexnet: 227x227x3), SGD lr 0.01 momentum 0.9, on synthetic data;
 * the runner is bench/torch/harness.py) in a Python that has torch, one process ('single') or
 * several under DistributedDataParallel with gloo ('ddp'), and returns its ms per step, samples/s
 * and the model's parameter counts.
 *
 * `npm run bench -- kernels|scaling|models` call it; their torch column appears
 * only where {@link findTorchPython} finds a Python for which `python3 -c "import torch"` works
 * (TANDEM_TORCH_PYTHON, then `python3`, then `/usr/bin/python3`), and is simply left out elsewhere.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The builtin models that have a PyTorch twin in bench/torch/. */
export const TORCH_MODELS = ['alexnet-mini', 'alexnet', 'resnet-mini', 'mobilenet-mini', 'mnist-node'] as const;
export type TorchModel = (typeof TORCH_MODELS)[number];

export interface TorchStepResult {
  mode: 'single' | 'ddp';
  model: TorchModel;
  torch: string;
  threads: number;
  batch: number;
  steps: number;
  procs?: number;
  /** ddp only: per-process ('local') or global-batch ('sync') BatchNormalization statistics. */
  batchNorm?: 'local' | 'sync';
  /** Element counts as Keras counts them (non-trainable: BatchNormalization's moving statistics). */
  trainableParameters: number;
  nonTrainableParameters: number;
  msPerStep: number;
  medianMsPerStep: number;
  samplesPerSecond: number;
  /** single only: the process's minor page faults per timed step. */
  minorFaultsPerStep?: number;
  /** single only: whether a 4 MiB malloc() was its own mmap() in the process (glibc's defaults: true; 'kept':
   *  false), the settings seen taking effect; absent without glibc. */
  mallocMapsFourMiB?: boolean;
  /** How glibc's malloc was set for the run (the options' `allocator`). */
  allocator: TorchAllocator;
}

/**
 * How glibc's malloc runs under PyTorch. 'glibc': its defaults, where a tensor above the mmap threshold (128 KiB,
 * raised as large blocks are freed) is mmap()ed and unmapped when freed, so a step's activations and gradients can
 * fault their pages in afresh at every step; on a virtual machine whose page faults are slow that alone can make a
 * step 1.5× longer (here: ~580 faults a step on alexnet-mini autocast, 9.5 → 16 ms). 'kept' (the default): freed
 * memory is kept for reuse (`MALLOC_MMAP_THRESHOLD_` 32 MiB, glibc's largest, and `MALLOC_TRIM_THRESHOLD_` 1 GiB, as
 * mallopt(3) reads them from the environment), what PyTorch's own tuning guide asks of an allocator (jemalloc or
 * tcmalloc): ~1 fault a step, and PyTorch at its fastest here.
 */
export type TorchAllocator = 'glibc' | 'kept';

const KEPT_MALLOC_ENV = { MALLOC_MMAP_THRESHOLD_: String(32 * 1024 * 1024), MALLOC_TRIM_THRESHOLD_: String(1 << 30) };
const MALLOC_VARIABLES = /^MALLOC_(MMAP_THRESHOLD|TRIM_THRESHOLD|TOP_PAD|MMAP_MAX|ARENA_MAX)_?$/;

/** The glibc malloc variables PyTorch runs under for `allocator` (this process's own are not passed on). */
export function mallocEnv(allocator: TorchAllocator): Record<string, string> {
  return allocator === 'kept' ? { ...KEPT_MALLOC_ENV } : {};
}

function childEnv(allocator: TorchAllocator): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !MALLOC_VARIABLES.test(k)));
  return { ...env, PYTHONUNBUFFERED: '1', ...mallocEnv(allocator) };
}

export interface TorchReferenceOptions {
  mode: 'single' | 'ddp';
  /** Default 'alexnet-mini'. */
  model?: TorchModel;
  /** ddp only (the script's default: 'local', DDP's own). */
  batchNorm?: 'local' | 'sync';
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
  /** single only: 'bf16' runs forward and loss under torch.autocast('cpu', dtype=torch.bfloat16). */
  precision?: 'fp32' | 'bf16';
  /** single only: model and inputs in channels_last. */
  channelsLast?: boolean;
  /** glibc malloc's settings for the run (default 'kept'; see {@link TorchAllocator}). */
  allocator?: TorchAllocator;
}

const DEFAULT_TIMEOUT_MS = 300_000;
const PROBE_TIMEOUT_MS = 20_000; // importing torch takes a second or two on a cold cache
const STDERR_TAIL_LINES = 20;

/**
 * The model's script (bench/torch/resnet_mini.py for 'resnet-mini'). The compiled module lives at
 * dist/bench/torch-reference.js and the scripts are not copied into dist/, so they are two levels
 * up; the second candidate serves a run from the source.
 */
export function torchScriptPath(model: TorchModel): string {
  const file = `${model.replaceAll('-', '_')}.py`;
  const candidates = [
    new URL(`../../bench/torch/${file}`, import.meta.url),
    new URL(`./torch/${file}`, import.meta.url),
  ].map(u => fileURLToPath(u));
  return candidates.find(p => existsSync(p)) ?? candidates[0];
}

/** The first Python that can `import torch`: TANDEM_TORCH_PYTHON, `python3`, `/usr/bin/python3`. */
export function findTorchPython(): string | undefined {
  const candidates = [process.env.TANDEM_TORCH_PYTHON, 'python3', '/usr/bin/python3'].filter(
    (c): c is string => c !== undefined && c.trim() !== '',
  );
  for (const python of new Set(candidates)) {
    const probe = spawnSync(python, ['-c', 'import torch'], { stdio: 'ignore', timeout: PROBE_TIMEOUT_MS });
    if (probe.error === undefined && probe.status === 0) return python;
  }
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The first of `names` in `record` that is not an integer >= min, described; undefined when all are. */
function badInteger(record: Record<string, unknown>, names: string[], min: number): string | undefined {
  const bad = names.find(
    n => typeof record[n] !== 'number' || !Number.isInteger(record[n]) || (record[n] as number) < min,
  );
  return bad === undefined ? undefined : `bad "${bad}": ${JSON.stringify(record[bad])}`;
}

/** The first of `names` in `record` that is not a finite number > 0, described. */
function badRate(record: Record<string, unknown>, names: string[]): string | undefined {
  const bad = names.find(
    n => typeof record[n] !== 'number' || !Number.isFinite(record[n]) || (record[n] as number) <= 0,
  );
  return bad === undefined ? undefined : `bad "${bad}": ${JSON.stringify(record[bad])}`;
}

/** Checks the script's JSON line; returns a description of what is wrong, or the result. */
function validateResult(value: unknown, options: TorchReferenceOptions): TorchStepResult | string {
  if (!isRecord(value)) return 'not a JSON object';
  const { mode, model, torch, batch, steps, procs, batchNorm } = value;
  if (mode !== 'single' && mode !== 'ddp') return `bad "mode": ${JSON.stringify(mode)}`;
  if (mode !== options.mode) return `"mode" is ${mode}, ${options.mode} was asked for`;
  const askedModel = options.model ?? 'alexnet-mini';
  if (model !== askedModel) return `"model" is ${JSON.stringify(model)}, ${askedModel} was asked for`;
  if (typeof torch !== 'string' || torch === '') return `bad "torch": ${JSON.stringify(torch)}`;
  const bad =
    badInteger(value, ['threads', 'batch', 'steps'], 1) ??
    badInteger(value, ['trainableParameters', 'nonTrainableParameters'], 0) ??
    badRate(value, ['msPerStep', 'medianMsPerStep', 'samplesPerSecond']) ??
    (mode === 'ddp' ? badInteger(value, ['procs'], 1) : undefined);
  if (bad !== undefined) return bad;
  if (batch !== options.batch || steps !== options.steps) {
    return (
      `ran batch ${String(batch)} x ${String(steps)} steps, batch ${options.batch} x ${options.steps} was ` +
      `asked for`
    );
  }
  if (mode === 'ddp' && batchNorm !== (options.batchNorm ?? 'local'))
    return `"batchNorm" is ${JSON.stringify(batchNorm)}, ${options.batchNorm ?? 'local'} was asked for`;
  const numbers = value as Record<string, number>;
  const result: TorchStepResult = {
    mode,
    model: askedModel,
    torch,
    threads: numbers.threads,
    batch: numbers.batch,
    steps: numbers.steps,
    trainableParameters: numbers.trainableParameters,
    nonTrainableParameters: numbers.nonTrainableParameters,
    msPerStep: numbers.msPerStep,
    medianMsPerStep: numbers.medianMsPerStep,
    samplesPerSecond: numbers.samplesPerSecond,
    allocator: options.allocator ?? 'kept',
  };
  const faults = value.minorFaultsPerStep;
  if (mode === 'single') {
    if (typeof faults !== 'number' || !(faults >= 0)) return `bad "minorFaultsPerStep": ${JSON.stringify(faults)}`;
    result.minorFaultsPerStep = faults;
    const seen = isRecord(value.mallocEnv) ? sortedEntries(value.mallocEnv) : undefined;
    if (seen !== sortedEntries(mallocEnv(result.allocator)))
      return `ran with malloc settings ${JSON.stringify(value.mallocEnv)}, not ${result.allocator}'s`;
    const maps = value.mallocMapsFourMiB;
    if (maps !== null && typeof maps !== 'boolean') return `bad "mallocMapsFourMiB": ${JSON.stringify(maps)}`;
    if (maps !== null && maps !== (result.allocator === 'glibc')) {
      const was = maps ? 'was' : 'was not';
      return `a 4 MiB malloc() ${was} its own mmap(): ${result.allocator}'s settings did not take effect`;
    }
    if (maps !== null) result.mallocMapsFourMiB = maps;
  }
  if (mode === 'ddp') Object.assign(result, { procs: procs as number, batchNorm: batchNorm as 'local' | 'sync' });
  return result;
}

function sortedEntries(record: Record<string, unknown>): string {
  return JSON.stringify(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : 1)));
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

  const args = [
    torchScriptPath(options.model ?? 'alexnet-mini'),
    '--mode',
    options.mode,
    '--batch',
    String(options.batch),
    '--steps',
    String(options.steps),
  ];
  if (options.warmup !== undefined) args.push('--warmup', String(options.warmup));
  if (options.threads !== undefined) args.push('--threads', String(options.threads));
  if (options.precision !== undefined) args.push('--precision', options.precision);
  if (options.channelsLast) args.push('--channels-last');
  if (options.mode === 'ddp') {
    if (options.procs !== undefined) args.push('--procs', String(options.procs));
    if (options.batchNorm !== undefined) args.push('--batch-norm', options.batchNorm);
    // the script's own ddp deadline fires first, so it can still stop its ranks and say why
    const scriptTimeoutS = timeoutMs >= 30_000 ? timeoutMs / 1000 - 10 : (timeoutMs * 0.8) / 1000;
    args.push('--timeout', String(Math.max(1, Math.floor(scriptTimeoutS))));
  }
  const allocator = options.allocator ?? 'kept';
  const envShown = Object.entries(mallocEnv(allocator)).map(([k, v]) => `${k}=${v}`);
  const command = [...envShown, python, ...args].join(' ');

  return new Promise<TorchStepResult>((resolve, reject) => {
    const child = spawn(python, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: childEnv(allocator),
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
      const tail =
        stderrTail.length > 0 ? `\n--- stderr (last ${stderrTail.length} lines) ---\n${stderrTail.join('\n')}` : '';
      reject(new Error(`torch reference failed: ${why}\n  command: ${command}${tail}`));
    };

    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM'); // the script then stops its ddp ranks
      killTimer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      killTimer.unref();
    }, timeoutMs);

    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      stdout += chunk;
    });
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
      const lines = stdout
        .split('\n')
        .map(l => l.trim())
        .filter(l => l !== '');
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
