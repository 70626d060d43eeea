/** Main side of the profiler: runs the profile worker and returns its measurements. */
import { resolveConfig, type TrainConfig } from '../config.js';
import { runOneShotWorker } from '../actors/one-shot-worker.js';
import type { ModelProfile } from './layer-profile.js';
import type { ProfileReply, ProfileRequest } from './profile-worker.js';
import { train } from '../trainer/train.js';

export interface ProfileOptions {
  /** Measured steps (after warm-up). Default 5. */
  steps?: number;
  warmupSteps?: number;
  /** Timed repetitions per layer. Default 3. */
  reps?: number;
  /**
   * Calibrate with a short real run (sequential, shared memory) on the
   * configured devices: per-layer times are scaled to the compute time a
   * device really sees there (cores are shared), and the per-step runtime
   * overhead (main-thread round trip, parameter load) is taken from it. Default true.
   */
  calibrate?: boolean;
}

/** Wasm code tiers up after some calls: fewer warm-up steps measure baseline-compiled kernels. */
const DEFAULT_WARMUP = 6;

export async function profileModel(config: TrainConfig, options: ProfileOptions = {}): Promise<ModelProfile> {
  const resolved = await resolveConfig({ ...config, strategy: 'sequential' });
  const request: ProfileRequest = { config: resolved, warmupSteps: options.warmupSteps ?? DEFAULT_WARMUP, steps: options.steps ?? 5, reps: options.reps ?? 3 };
  const { profile } = await runOneShotWorker<Extract<ProfileReply, { type: 'profile' }>>(new URL('./profile-worker.js', import.meta.url), request,
    `profiler of ${config.model ?? 'mlp'}`);
  if (options.calibrate !== false) await calibrate(profile, config, request.warmupSteps + request.steps);
  return profile;
}

async function calibrate(profile: ModelProfile, config: TrainConfig, steps: number): Promise<void> {
  const { link, trace, out, faultInjection, ...plain } = config;
  void link; void trace; void out; void faultInjection;
  const run = await train({ ...plain, strategy: 'sequential', steps, epochs: undefined });
  const measured = profile.stepForwardMs + profile.stepBackwardMs;
  const scale = measured > 0 ? run.timings.steadyComputeMs / measured : 1;
  for (const l of profile.layers) { l.forwardMs *= scale; l.backwardMs *= scale; }
  profile.stepForwardMs *= scale;
  profile.stepBackwardMs *= scale;
  const comm = run.timings.meanExchangeMs + run.timings.meanUpdateMs;
  profile.overheadMs = Math.max(0, run.steadyStepMs - run.timings.steadyComputeMs - comm);
  profile.calibration = { devices: run.config.devices, computeScale: scale, steadyStepMs: run.steadyStepMs };
}
