/**
 * Reads a model saved in the TensorFlow.js layers format (model.json + weights files; see src/actors/model-files.ts for
 * the writer).
 */
import { readLayersModelFiles } from './layers-model-files.js';

/**
 * A tfjs IOHandler over model.json on disk, for `tf.loadLayersModel` without tfjs-node; malformed files fail with
 * BAD_MODEL naming the file.
 */
export function fileModelHandler(modelJsonPath: string) {
  return {
    async load() {
      const { modelTopology, weightSpecs, weightData } = await readLayersModelFiles(modelJsonPath);
      return { modelTopology, weightSpecs: weightSpecs as never, weightData };
    },
  };
}
