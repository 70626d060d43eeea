/** Reads a model saved in the TensorFlow.js layers format (model.json + weights files; see src/trainer/model-files.ts for the writer). */
import { readFile } from 'node:fs/promises';
import path from 'node:path';

/** A tfjs IOHandler over model.json on disk, for `tf.loadLayersModel` without tfjs-node. */
export function fileModelHandler(modelJsonPath: string) {
  return {
    async load() {
      const json = JSON.parse(await readFile(modelJsonPath, 'utf8')) as {
        modelTopology: object; weightsManifest: { paths: string[]; weights: { name: string; shape: number[]; dtype: 'float32' }[] }[];
      };
      const dir = path.dirname(modelJsonPath);
      const buffers: Buffer[] = [];
      const weightSpecs = json.weightsManifest.flatMap(g => g.weights);
      for (const g of json.weightsManifest) for (const p of g.paths) buffers.push(await readFile(path.join(dir, p)));
      const all = Buffer.concat(buffers);
      return { modelTopology: json.modelTopology, weightSpecs, weightData: all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength) };
    },
  };
}
