/** What a saved model.json brings to a run: its compiled optimizer (and loss, read by resolve-loss.ts). */
import { TandemError } from '../errors.js';
import { bad } from '../config-checks.js';
import type { TrainConfig } from '../config-types.js';
import { optimizerKeys, resolveOptimizer, type OptimizerFields } from '../optim/resolve-optimizer.js';
import { SavedOptimizerProblem, savedOptimizerFields } from '../optim/saved-optimizer.js';
import type { OptimizerConfig } from '../optim/flat-optimizer.js';
import { sourcePath } from '../source-path.js';
import { readRegularFileSync } from '../read-regular-file.js';
import { MAX_MODEL_JSON_BYTES } from '../model/layers-model-files.js';

/** A saved model.json's trainingConfig (written when a compiled model is saved with its optimizer), if any. */
export function savedTrainingConfig(source: string): { loss?: unknown; optimizer_config?: unknown } | undefined {
  if (!source.endsWith('.json')) return undefined;
  try {
    return (
      JSON.parse(readRegularFileSync(sourcePath(source), MAX_MODEL_JSON_BYTES).toString('utf8')) as {
        trainingConfig?: { loss?: unknown; optimizer_config?: unknown };
      }
    ).trainingConfig;
  } catch {
    return undefined; // the model loader reports an unreadable model.json
  }
}

/**
 * The optimizer of `config`: the one it names, else the one a saved model.json (`source`) was compiled with
 * (`savedOptimizerConfig`, its trainingConfig's), the config's own hyper-parameters over the saved ones
 * (saved-optimizer.ts); a refusal then names the file.
 */
export function optimizerOf(config: TrainConfig, source: string, savedOptimizerConfig: unknown): OptimizerConfig {
  if (config.optimizer !== undefined) return resolveOptimizer(config);
  let saved: OptimizerFields | undefined;
  try {
    saved = savedOptimizerFields(savedOptimizerConfig);
  } catch (err) {
    if (!(err instanceof SavedOptimizerProblem)) throw err;
    bad(
      'optimizer',
      `${sourcePath(source)} was compiled with ${err.message}: give optimizer (--optimizer) to train with one ` +
        `tandem has`,
    );
  }
  if (!saved) return resolveOptimizer(config);
  const given = Object.fromEntries(
    Object.entries(config).filter(([k, v]) => v !== undefined && optimizerKeys().has(k)),
  );
  try {
    return resolveOptimizer({ ...saved, ...given });
  } catch (err) {
    if (!(err instanceof TandemError)) throw err;
    throw new TandemError(
      err.code,
      `${err.message} (${saved.optimizer}: the optimizer ${sourcePath(source)} was compiled with; give optimizer ` +
        `(--optimizer) to choose another)`,
    );
  }
}
