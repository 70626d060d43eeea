/** Main side of the profiler: runs the profile worker and returns its measurements. */
import { Worker } from 'node:worker_threads';
import { resolveConfig, type TrainConfig } from '../config.js';
import { TandemError } from '../errors.js';
import type { ModelProfile } from './layer-profile.js';
import type { ProfileReply, ProfileRequest } from './profile-worker.js';

export interface ProfileOptions {
  /** Measured steps (after warm-up). Default 5. */
  steps?: number;
  warmupSteps?: number;
  /** Timed repetitions per layer. Default 3. */
  reps?: number;
}

export async function profileModel(config: TrainConfig, options: ProfileOptions = {}): Promise<ModelProfile> {
  const resolved = await resolveConfig({ ...config, strategy: 'sequential' });
  const request: ProfileRequest = { config: resolved, warmupSteps: options.warmupSteps ?? 2, steps: options.steps ?? 5, reps: options.reps ?? 3 };
  const worker = new Worker(new URL('./profile-worker.js', import.meta.url), { workerData: request, name: 'tandem-profiler' });
  try {
    const reply = await new Promise<ProfileReply>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.once('exit', code => reject(new TandemError('WORKER_EXITED', `the profiler thread exited with code ${code}`)));
    });
    if (reply.type === 'error') throw new TandemError(reply.error.code ?? 'DEVICE_FAILED', `profiling ${config.model ?? 'mlp'} failed: ${reply.error.message}`);
    return reply.profile;
  } finally {
    await worker.terminate();
  }
}
