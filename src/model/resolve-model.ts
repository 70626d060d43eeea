/** Builds a model from its spec (builtin name or module path) on the caller's own `tf`. */
import { TandemError } from '../errors.js';
import type { LayersModel, Tf, Tensor } from '../engine/tfjs-types.js';
import { isModulePath, loadDefaultExport, resolveModuleUrl } from '../data/resolve-dataset.js';

function resolveModulePath(source: string): string {
  return fileURLToPath(resolveModuleUrl(source, 'model'));
}
import { BUILTIN_MODELS, type ModelFactory, type ModelOptions } from './builtin-models.js';
import { fileURLToPath } from 'node:url';
import { loadModelFile } from './file-model-handler.js';
import { getEngine } from '../engine/engine-registry.js';
import { outputActivation, outputLoss } from './output-loss.js';
import { withSeededMathRandom } from './seeded-math-random.js';
import { sourcePath } from '../source-path.js';

export interface ModelSpec {
  source: string;
  options: ModelOptions;
}

export async function resolveModelFactory(source: string): Promise<ModelFactory> {
  const builtin = BUILTIN_MODELS[source];
  if (builtin) return builtin.factory;
  if (source.endsWith('.json')) {
    // An existing TensorFlow.js layers model (topology + weights): trained from its own weights.
    const file = source.startsWith('file:') ? fileURLToPath(source) : resolveModulePath(source);
    return tf => loadModelFile(tf, file).catch(unknownClass);
  }
  if (!isModulePath(source)) {
    throw new TandemError(
      'UNKNOWN_MODEL',
      `unknown model '${source}'. Builtins: ${Object.keys(BUILTIN_MODELS).join(', ')}; ` +
        'or give a path to an ES module whose default export is (tf, options) => tf.LayersModel.',
    );
  }
  return loadDefaultExport<ModelFactory>(resolveModuleUrl(source, 'model'), 'model');
}

export async function buildModel(tf: Tf, spec: ModelSpec): Promise<LayersModel> {
  const factory = await resolveModelFactory(spec.source);
  const name = sourcePath(spec.source);
  let model: unknown;
  try {
    model = await withSeededMathRandom(spec.options.seed, () => factory(tf, spec.options));
  } catch (err) {
    if (err instanceof TandemError) throw err;
    const what = name.endsWith('.json') ? `tfjs cannot build the model ${name}` : `the model factory of ${name} threw`;
    throw new TandemError(
      'BAD_MODEL',
      `${what} (options ${JSON.stringify(spec.options)}): ` +
        `${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`,
      undefined,
      { cause: err },
    );
  }
  if (
    !model ||
    typeof (model as LayersModel).apply !== 'function' ||
    !Array.isArray((model as LayersModel).trainableWeights)
  ) {
    throw new TandemError(
      'BAD_MODEL',
      `model factory ${name}: expected it to return a tf.LayersModel (tf.sequential(…) or tf.model(…)), found ` +
        (model === null
          ? 'null'
          : typeof model === 'object'
            ? `an object with keys ${Object.keys(model).slice(0, 6).join(', ') || 'none'}`
            : typeof model),
    );
  }
  return model as LayersModel;
}

/**
 * The model as a device trains it, prepared by its engine (native, unless `nativeFusion` is off: Conv2D layers run
 * fused).
 */
export async function buildTrainingModel(
  tf: Tf,
  cfg: { model: ModelSpec; backend: string; nativeFusion: boolean },
): Promise<LayersModel> {
  const model = await buildModel(tf, cfg.model);
  getEngine(cfg.backend).prepareModel?.(tf, model, { nativeFusion: cfg.nativeFusion });
  return model;
}

/** True when the model ends in a softmax (outputs probabilities, not logits), whatever layer applies it. */
export function outputsProbabilities(model: LayersModel): boolean {
  return outputActivation(model) === 'softmax';
}

/**
 * Mean cross-entropy of `output` against integer `labels`, and the number of correct predictions: outputLoss's
 * (one fused kernel from logits where the backend has it).
 */
export function classificationLoss(
  tf: Tf,
  output: Tensor,
  labels: Tensor,
  classes: number,
  probabilities: boolean,
): { loss: Tensor; correct: Tensor } {
  return outputLoss(tf, output, labels, { kind: 'categorical', fromProbabilities: probabilities }, classes);
}

/**
 * tfjs's "Unknown layer: X" (a class registered with tf.serialization.registerClass on the thread that saved the model,
 * not on this one) as BAD_MODEL naming the class and the `plugins` option; any other error as it is.
 */
export function unknownClass(err: unknown): never {
  const name =
    err instanceof Error
      ? /Unknown (?:layer|constraint|initializer|regularizer|activation): (\S+?)\./.exec(err.message)?.[1]
      : undefined;
  if (name === undefined) throw err;
  throw new TandemError(
    'BAD_MODEL',
    `the model uses class ${name}, which is not registered on this thread: every thread builds the model, so name ` +
      `the module that registers it (tf.serialization.registerClass(${name})) in the plugins option ` +
      "(fit(model, x, y, { plugins: ['./my-layers.mjs'] }), config.plugins, --plugin); each thread loads it first",
    undefined,
    { cause: err },
  );
}
