/** The checkpoint fields, from the config alone. */
import { bad } from '../config-checks.js';
import type { ResolvedConfig, TrainConfig } from '../config-types.js';

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
