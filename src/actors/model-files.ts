/**
 * Writes a model in the TensorFlow.js layers format (model.json + one weights file); src/model/file-model-handler.ts
 * reads it.
 */
import path from 'node:path';
import type { ModelArtifactsData } from './protocol.js';
import { writeFileAtomically } from '../output/atomic-write.js';
import { makeDirectory } from '../output/make-directory.js';
import { OUT_FILES } from '../output/output-places.js';

export const WEIGHTS_FILE = OUT_FILES.weights;

export async function writeModelFiles(dir: string, artifacts: ModelArtifactsData): Promise<string> {
  await makeDirectory(dir, `model directory ${dir}`);
  await writeFileAtomically(path.join(dir, WEIGHTS_FILE), new Uint8Array(artifacts.weightData));
  const modelJson = {
    format: 'layers-model',
    generatedBy: 'tandem',
    convertedBy: null,
    modelTopology: artifacts.modelTopology,
    weightsManifest: [{ paths: [WEIGHTS_FILE], weights: artifacts.weightSpecs }],
  };
  const file = path.join(dir, OUT_FILES.model);
  await writeFileAtomically(file, JSON.stringify(modelJson));
  return file;
}

/** A model's topology and weights in memory (one weights buffer), through tfjs's own save path. */
export async function modelArtifacts(
  tf: typeof import('@tensorflow/tfjs'),
  model: import('@tensorflow/tfjs').LayersModel,
): Promise<ModelArtifactsData> {
  let out: ModelArtifactsData | undefined;
  await model.save(
    tf.io.withSaveHandler(async a => {
      const data = a.weightData;
      out = {
        modelTopology: a.modelTopology as object,
        weightSpecs: a.weightSpecs as never,
        weightData: Array.isArray(data) ? tf.io.concatenateArrayBuffers(data) : (data as ArrayBuffer),
      };
      return { modelArtifactsInfo: { dateSaved: new Date(), modelTopologyType: 'JSON' } };
    }),
  );
  return out!;
}
