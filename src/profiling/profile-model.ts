/** Main side of the profiler: runs the profile worker and returns its measurements. */
import { Worker } from 'node:worker_threads';
import { resolveConfig, type TrainConfig } from '../config.js';
import { TandemError } from '../errors.js';
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
  let profile: ModelProfile;
  const worker = new Worker(new URL('./profile-worker.js', import.meta.url), { workerData: request, name: 'tandem-profiler' });
  try {
    const reply = await new Promise<ProfileReply>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.once('exit', code => reject(new TandemError('WORKER_EXITED', `the profiler thread exited with code ${code}`)));
    });
    if (reply.type === 'error') throw new TandemError(reply.error.code ?? 'DEVICE_FAILED', `profiling ${config.model ?? 'mlp'} failed: ${reply.error.message}`);
    profile = reply.profile;
  } finally {
    await worker.terminate();
  }
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
