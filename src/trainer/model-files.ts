/** Writes a model in the TensorFlow.js layers format (model.json + one weights file); src/model/file-model-handler.ts reads it. */
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ModelArtifactsData } from '../actors/protocol.js';

export const WEIGHTS_FILE = 'weights.bin';

async function writeAtomically(file: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}`;
  await writeFile(tmp, data);
  await rename(tmp, file);
}

export async function writeModelFiles(dir: string, artifacts: ModelArtifactsData): Promise<string> {
  await mkdir(dir, { recursive: true });
  await writeAtomically(path.join(dir, WEIGHTS_FILE), new Uint8Array(artifacts.weightData));
  const modelJson = {
    format: 'layers-model',
    generatedBy: 'tandem',
    convertedBy: null,
    modelTopology: artifacts.modelTopology,
    weightsManifest: [{ paths: [WEIGHTS_FILE], weights: artifacts.weightSpecs }],
  };
  const file = path.join(dir, 'model.json');
  await writeAtomically(file, JSON.stringify(modelJson));
  return file;
}

/** A model's topology and weights in memory (one weights buffer), through tfjs's own save path. */
export async function modelArtifacts(tf: typeof import('@tensorflow/tfjs'), model: import('@tensorflow/tfjs').LayersModel): Promise<ModelArtifactsData> {
  let out: ModelArtifactsData | undefined;
  await model.save(tf.io.withSaveHandler(async a => {
    const data = a.weightData;
    out = { modelTopology: a.modelTopology as object, weightSpecs: a.weightSpecs as never, weightData: Array.isArray(data) ? tf.io.concatenateArrayBuffers(data) : data as ArrayBuffer };
    return { modelArtifactsInfo: { dateSaved: new Date(), modelTopologyType: 'JSON' } };
  }));
  return out!;
}
