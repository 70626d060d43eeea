/** What a saved model.json brings to a run: its compiled optimizer (and loss, read by resolve-loss.ts). */
import { TandemError } from '../errors.js';
import { bad } from '../config-checks.js';
import type { ResolvedConfig, TrainConfig } from '../config-types.js';
import { optimizerKeys, resolveOptimizer, type OptimizerFields } from '../optim/resolve-optimizer.js';
import { SavedOptimizerProblem, savedOptimizerFields } from '../optim/saved-optimizer.js';
import type { OptimizerConfig } from '../optim/flat-optimizer.js';
import { sourcePath } from '../source-path.js';
import { readRegularFileSync } from '../read-regular-file.js';
import { MAX_MODEL_JSON_BYTES, readLayersModelFiles, splitOptimizerWeights } from '../model/layers-model-files.js';
import {
  checkedIterations,
  optimizerWeightsOf,
  OptimizerWeightsProblem,
  type NamedValues,
  type OptimizerWeights,
} from '../optim/optimizer-weights.js';

/** What a saved model.json says of its training: loss and optimizer, and whether its optimizer's state is saved. */
export interface SavedTraining {
  loss?: unknown;
  optimizer_config?: unknown;
  /** Its weightsManifest lists weights of group 'optimizer' (`model.save({ includeOptimizer: true })`). */
  optimizerState: boolean;
}

/** A saved model.json's trainingConfig (written when a compiled model is saved with its optimizer), if any. */
export function savedTrainingConfig(source: string): SavedTraining | undefined {
  if (!source.endsWith('.json')) return undefined;
  try {
    const json = JSON.parse(readRegularFileSync(sourcePath(source), MAX_MODEL_JSON_BYTES).toString('utf8')) as {
      trainingConfig?: { loss?: unknown; optimizer_config?: unknown };
      weightsManifest?: { weights?: { group?: unknown }[] }[];
    };
    if (!json.trainingConfig) return undefined;
    const groups = Array.isArray(json.weightsManifest) ? json.weightsManifest : [];
    const optimizerState = groups.some(g => Array.isArray(g?.weights) && g.weights.some(w => w?.group === 'optimizer'));
    return { ...json.trainingConfig, optimizerState };
  } catch {
    return undefined; // the model loader reports an unreadable model.json
  }
}

/**
 * The optimizer state a saved model.json (`source`) holds, when the run trains with the optimizer the model was
 * compiled with (a config naming its optimizer compiles afresh, as `model.compile` after `tf.loadLayersModel`): the
 * file the run seeds its slots from (training-run.ts), and the optimizer counting on from the saved iterations. A
 * method whose heads are local keeps their state on each device: the optimizer starts afresh, with a warning.
 */
export async function savedOptimizerState(
  config: TrainConfig,
  source: string,
  saved: SavedTraining | undefined,
  optimizer: OptimizerConfig,
  localHeads: string | undefined,
): Promise<Pick<ResolvedConfig, 'optimizer' | 'optimizerStateFrom' | 'optimizerWarning'>> {
  if (config.optimizer !== undefined || !saved?.optimizerState || saved.optimizer_config === undefined)
    return { optimizer };
  const file = sourcePath(source);
  if (localHeads !== undefined)
    return {
      optimizer,
      optimizerWarning:
        `${file} holds its optimizer's state, which method ${localHeads} does not take up (each device keeps its ` +
        "head's state): the optimizer starts afresh",
    };
  const list = splitOptimizerWeights(file, await readLayersModelFiles(file)).optimizer;
  try {
    const iterations = checkedIterations(optimizer, list);
    return { optimizer: { ...optimizer, stepsBefore: iterations }, optimizerStateFrom: file };
  } catch (err) {
    throw optimizerStateError(file, err);
  }
}

/**
 * The saved optimizer state a run starts from (`optimizerStateFrom`, found by savedOptimizerState), read and checked
 * against the model's trainable `weights` (model order): tfjs's list, and the same state by slot and weight; none
 * when the run starts its optimizer afresh.
 */
export async function readSavedOptimizerState(
  cfg: Pick<ResolvedConfig, 'optimizer' | 'optimizerStateFrom'>,
  weights: readonly { name: string; shape: number[] }[],
): Promise<{ list: NamedValues[]; state: OptimizerWeights } | undefined> {
  const file = cfg.optimizerStateFrom;
  if (file === undefined) return undefined;
  const list = splitOptimizerWeights(file, await readLayersModelFiles(file)).optimizer;
  try {
    return { list, state: optimizerWeightsOf(cfg.optimizer, weights, list) };
  } catch (err) {
    throw optimizerStateError(file, err);
  }
}

/** An OptimizerWeightsProblem of model.json `file`'s saved optimizer state as BAD_MODEL, with the ways round it. */
function optimizerStateError(file: string, err: unknown): unknown {
  if (!(err instanceof OptimizerWeightsProblem)) return err;
  return new TandemError(
    'BAD_MODEL',
    `model ${file}: its optimizer's state (the weights of group 'optimizer'): ${err.message}; save the model ` +
      'without includeOptimizer, or give optimizer (--optimizer) to start one afresh',
  );
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
