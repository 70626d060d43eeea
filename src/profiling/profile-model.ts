/** Main side of the profiler: runs the profile worker and returns its measurements. */
import { resolveConfig } from '../config.js';
import { sequentialTrialConfig } from '../config/check-schedule.js';
import { TandemError } from '../errors.js';
import type { TrainConfig } from '../config-types.js';
import { runOneShotWorker } from '../actors/one-shot-worker.js';
import type { ModelProfile } from './layer-profile.js';
import type { ProfileReply, ProfileRequest } from './profile-worker.js';
import { profileSlice } from './profile-config.js';
import type { ClockKind } from './layer-clock.js';
import { spreadOf } from './lockstep.js';

export interface ProfileOptions {
  /** Measured steps (after warm-up). Default 5. */
  steps?: number;
  warmupSteps?: number;
  /** Timed repetitions per layer (after one discarded); the median counts. Default 3. */
  reps?: number;
  /**
   * The clock to time on. Default: the one the engine's kernel site calls for —
   * the profiling thread's CPU time where the engine computes on that thread
   * (wasm, cpu, native with one OpenMP thread), the process's CPU time where it
   * has threads of its own, wall clock on an accelerator (see layer-clock.ts).
   */
  clock?: ClockKind;
  /**
   * Calibrate with a short real run (sequential, shared memory) on the
   * configured devices: per-layer times are scaled to the compute time a
   * device really sees there (cores are shared), and the per-step runtime
   * overhead (main-thread round trip, parameter load) is taken from it, and
   * the process CPU (every thread) a steady step costs. The run is made by
   * the `runTrial` passed to profileModel. Default true.
   */
  calibrate?: boolean;
}

/** The parts of a finished run (`TrainSummary`) that calibration reads. */
export interface TrialRun {
  config: { devices: number };
  steadyStepMs: number;
  timings: { steadyComputeMs: number; meanExchangeMs: number; meanUpdateMs: number };
}

/**
 * Runs the short real run that calibration measures: callers pass `train`
 * (src/trainer/train.ts). Injected rather than imported, because the trainer
 * itself profiles for `--strategy auto`: the profiler importing it would be a cycle.
 */
export type RunTrial = (config: TrainConfig, hooks?: TrialHooks) => Promise<TrialRun>;

/**
 * What calibration listens to during the trial (the trainer's TrainHooks has it): each step's end, as the main thread
 * sees it.
 */
export interface TrialHooks {
  onStep?(metrics: { step: number }): void;
}

/** Wasm code tiers up after some calls: fewer warm-up steps measure baseline-compiled kernels. */
const DEFAULT_WARMUP = 6;

export async function profileModel(
  config: TrainConfig,
  runTrial: RunTrial,
  options: ProfileOptions = {},
): Promise<ModelProfile> {
  const { splitLayer: _split, ...checked } = config; // the shares and bucket caps checked as auto reads them
  void _split;
  const resolved = await resolveConfig({ ...checked, strategy: 'auto' });
  const request: ProfileRequest = {
    config: profileSlice(resolved), // the thread's slice, not the whole config
    warmupSteps: count('warmupSteps', options.warmupSteps ?? DEFAULT_WARMUP, 0),
    steps: count('steps', options.steps ?? 5, 1),
    reps: count('reps', options.reps ?? 3, 1),
    clock: options.clock,
  };
  const { profile } = await runOneShotWorker<Extract<ProfileReply, { type: 'profile' }>>(
    new URL('./profile-worker.js', import.meta.url),
    request,
    `profiler of ${config.model ?? 'mlp'}`,
  );
  if (options.calibrate !== false) await calibrate(profile, config, request.warmupSteps, request.steps, runTrial);
  return profile;
}

/** A profiler option: an integer in [min, 10,000]; the profile would be NaN or empty otherwise. */
function count(option: keyof ProfileOptions, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > 10_000) {
    throw new TandemError(
      'BAD_CONFIG',
      `profile.${option}: must be an integer in [${min}, 10000], got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

async function calibrate(
  profile: ModelProfile,
  config: TrainConfig,
  warmup: number,
  measured: number,
  runTrial: RunTrial,
): Promise<void> {
  const steps = warmup + measured;
  // A trial writes nothing: no outputs, no checkpoints (the run being profiled for holds those places).
  const { link, trace, tensorboard, dashboard, dashboardHost, out, checkpointDir, checkpointEvery, resume, ...plain } =
    config;
  void link;
  void trace;
  void tensorboard;
  void dashboard;
  void dashboardHost;
  void out;
  void checkpointDir;
  void checkpointEvery;
  void resume;
  const steady = new SteadySteps(warmup);
  const run = await runTrial(
    { ...sequentialTrialConfig(plain), steps, epochs: undefined },
    { onStep: m => steady.step(m.step) },
  );
  const profiled = profile.stepForwardMs + profile.stepBackwardMs;
  const scale = profiled > 0 ? run.timings.steadyComputeMs / profiled : 1;
  for (const l of profile.layers) {
    l.forwardMs *= scale;
    l.backwardMs *= scale;
  }
  profile.stepForwardMs *= scale;
  profile.stepBackwardMs *= scale;
  const comm = run.timings.meanExchangeMs + run.timings.meanUpdateMs;
  profile.overheadMs = Math.max(0, run.steadyStepMs - run.timings.steadyComputeMs - comm);
  profile.calibration = {
    devices: run.config.devices,
    computeScale: scale,
    steadyStepMs: run.steadyStepMs,
    cpuMsPerStep: steady.cpuMsPerStep(),
    stepSpreadMs: steady.periodSpreadMs(),
  };
}

/**
 * The trial's steady steps, from the end of its step `warmup` (the profiler's warm-up count; at least the first step)
 * to the end of its last step, as the main thread hears of them: the process CPU (process.cpuUsage: every thread — the
 * devices' compute and comm threads, the main thread, V8's helpers) per step, and the spread (standard deviation) of
 * the step periods (lockstep.ts). Startup (workers, model, engine) and the warm-up steps are left out. Each is
 * undefined
 * when the trial reported too few steps.
 */
class SteadySteps {
  private first?: { step: number; cpuMs: number };
  private last?: { step: number; cpuMs: number };
  private readonly ends: number[] = [];
  constructor(private readonly warmup: number) {}

  step(step: number): void {
    if (step < Math.max(1, this.warmup)) return;
    const cpu = process.cpuUsage();
    const at = { step, cpuMs: (cpu.user + cpu.system) / 1000 };
    this.ends.push(performance.now());
    if (!this.first) this.first = at;
    else this.last = at;
  }

  cpuMsPerStep(): number | undefined {
    const { first, last } = this;
    return first && last && last.step > first.step ? (last.cpuMs - first.cpuMs) / (last.step - first.step) : undefined;
  }

  periodSpreadMs(): number | undefined {
    return spreadOf(this.ends.slice(1).map((end, i) => end - this.ends[i]));
  }
}
