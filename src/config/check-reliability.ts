/** The checkpoint fields and the fault injection (a test hook), from the config alone. */
import { bad, oneOf } from '../config-checks.js';
import type { ResolvedConfig, TrainConfig } from '../config-types.js';
import { FAULT_PHASES, type FaultInjection } from '../monitor/reliability-options.js';
import { positiveInt } from '../options/option-checks.js';

/** `writer`: this process writes checkpoints (host 0; every other host writes nothing). */
export function checkpointFields(
  config: TrainConfig,
  writer: boolean,
): Pick<ResolvedConfig, 'checkpointEvery' | 'checkpointDir' | 'resume' | 'keepCheckpoints' | 'stopGraceMs'> {
  if (config.checkpointEvery !== undefined && config.checkpointDir === undefined && config.out === undefined)
    bad('checkpointEvery', 'needs a place for the checkpoints: give checkpointDir or out');
  return {
    checkpointEvery: config.checkpointEvery,
    checkpointDir: writer ? config.checkpointDir : undefined,
    resume: config.resume,
    keepCheckpoints: config.keepCheckpoints ?? 3,
    stopGraceMs: config.stopGraceMs ?? 5000,
  };
}

export function faultInjectionOf(fi: FaultInjection | undefined, devices: number): FaultInjection | undefined {
  if (fi === undefined) return undefined;
  positiveInt()(fi.step, 'faultInjection.step');
  if (!Number.isInteger(fi.device) || fi.device < 0 || fi.device >= devices)
    bad('faultInjection.device', `must be in [0, ${devices})`);
  oneOf('faultInjection.phase', fi.phase, FAULT_PHASES);
  oneOf('faultInjection.kind', fi.kind, ['throw', 'exit', 'hang', 'nan', 'perturb'] as const);
  if (fi.kind === 'nan' && fi.phase !== 'forward')
    bad('faultInjection.kind', "'nan' is injected in the forward pass only");
  if (fi.kind === 'perturb' && fi.phase !== 'update')
    bad('faultInjection.kind', "'perturb' is injected in the update only");
  return fi;
}
