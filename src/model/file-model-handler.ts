/**
 * Reads a model saved in the TensorFlow.js layers format (model.json + weights files; see src/actors/model-files.ts for
 * the writer).
 */
import type { LayersModel, Tf } from '../engine/tfjs-types.js';
import { assignWeight } from './flat-weights.js';
import { readLayersModelFiles, splitOptimizerWeights } from './layers-model-files.js';

/** The model's own files: an optimizer's saved state is read apart (config/saved-model.ts), never built here. */
async function modelFiles(modelJsonPath: string) {
  return splitOptimizerWeights(modelJsonPath, await readLayersModelFiles(modelJsonPath)).model;
}

/**
 * A tfjs IOHandler over model.json on disk, for `tf.loadLayersModel` without tfjs-node; malformed files fail with
 * BAD_MODEL naming the file.
 */
export function fileModelHandler(modelJsonPath: string) {
  return {
    async load() {
      const { modelTopology, weightSpecs, weightData } = await modelFiles(modelJsonPath);
      return { modelTopology, weightSpecs: weightSpecs as never, weightData };
    },
  };
}

/**
 * `tf.loadLayersModel` of model.json on disk with its weights exactly as saved. tfjs's load sets each weight through
 * its constraint (a kernelConstraint's maxNorm, nonNeg, …), which tfjs's `model.fit` never applies (it trains the
 * variables themselves): a model loaded so would start, evaluate or continue from other weights than the model that
 * was saved. The constrained weights are set back to the file's values.
 */
export async function loadModelFile(tf: Tf, modelJsonPath: string): Promise<LayersModel> {
  const { modelTopology, weightSpecs, weightData } = await modelFiles(modelJsonPath);
  const specs = weightSpecs as Parameters<Tf['io']['decodeWeights']>[1];
  const model = await tf.loadLayersModel({ load: async () => ({ modelTopology, weightSpecs: specs, weightData }) });
  const constrained = model.weights.filter(w => w.constraint != null);
  if (constrained.length === 0) return model;
  const saved = tf.io.decodeWeights(weightData, specs);
  for (const w of constrained) if (saved[w.originalName]) assignWeight(w, saved[w.originalName]);
  tf.dispose(Object.values(saved));
  return model;
}
