/**
 * What `fit` hands a run, in a private directory: the model (tfjs layers format, with its compiled optimizer in the
 * trainingConfig, as a saved model.json carries it) and the samples (binary files and a generated data module that
 * reads them), so every device thread builds the same model and reads the same samples.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type * as tfNs from '@tensorflow/tfjs';
import { modelArtifacts, writeModelFiles } from '../actors/model-files.js';
import type { FitY } from './fit-targets.js';
import type { FitCaller } from './fit-caller.js';
import { assertTrainable } from '../model/trainability.js';
import type { ModelArtifactsData } from '../actors/protocol.js';
import { optimizerStateFiles, type OptimizerStateFiles } from './fit-optimizer-state.js';

/** The private directory of one fit: its model.json, its data module; `remove()` deletes it all. */
export interface FitFiles {
  dir: string;
  modelJson: string;
  dataModule: string;
  remove(): Promise<void>;
}

export async function writeFitFiles(
  tf: typeof tfNs,
  model: tfNs.LayersModel,
  x: tfNs.Tensor,
  y: FitY,
  classes: number,
  who: Exclude<FitCaller, 'evaluate'>,
): Promise<FitFiles> {
  checkTrainable(tf, model, x.shape.slice(1), who);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tandem-fit-'));
  try {
    const artifacts = withOptimizerState(await modelArtifacts(tf, model), await optimizerStateFiles(model, who));
    const modelJson = await writeModelFiles(path.join(dir, 'model'), artifacts);
    await addOptimizer(modelJson, model);
    const dataModule = await writeSamples(dir, x, y, classes);
    return { dir, modelJson, dataModule, remove: () => rm(dir, { recursive: true, force: true }) };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * A model tandem cannot train, refused in the caller's name (the run would name its private model.json). The check's
 * training forward pass moves BatchNormalization's moving statistics: the model's non-trainable weights are put back.
 */
function checkTrainable(tf: typeof tfNs, model: tfNs.LayersModel, sample: number[], who: FitCaller): void {
  const kept = model.nonTrainableWeights.map(w => tf.clone(w.read()));
  try {
    assertTrainable(tf, model, sample, `${who}: the model`);
  } finally {
    model.nonTrainableWeights.forEach((w, i) => w.write(kept[i]));
    tf.dispose(kept);
  }
}

/** The optimizer's state appended to the model's weights, as `model.save({ includeOptimizer: true })` appends it. */
function withOptimizerState(artifacts: ModelArtifactsData, state: OptimizerStateFiles | undefined): ModelArtifactsData {
  if (!state) return artifacts;
  return {
    ...artifacts,
    weightSpecs: [...artifacts.weightSpecs, ...(state.specs as ModelArtifactsData['weightSpecs'])],
    weightData: concatenateBytes(artifacts.weightData, state.data),
  };
}

function concatenateBytes(a: ArrayBuffer, b: ArrayBuffer): ArrayBuffer {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(new Uint8Array(a), 0);
  out.set(new Uint8Array(b), a.byteLength);
  return out.buffer;
}

/** The compiled optimizer into model.json's trainingConfig (what `model.save({ includeOptimizer })` writes). */
async function addOptimizer(modelJson: string, model: tfNs.LayersModel): Promise<void> {
  const json = JSON.parse(await readFile(modelJson, 'utf8')) as Record<string, unknown>;
  const optimizer = model.optimizer;
  json.trainingConfig = {
    optimizer_config: { class_name: optimizer.getClassName(), config: optimizer.getConfig() },
  };
  await writeFile(modelJson, JSON.stringify(json));
}

/**
 * The data module every thread imports: samples from x.bin, labels (or, with a targetShape, target tensors) from
 * y.bin, read synchronously by index.
 */
const DATA_MODULE = `import { readFileSync } from 'node:fs';
const here = new URL('.', import.meta.url);
const floats = name => new Float32Array(new Uint8Array(readFileSync(new URL(name, here))).buffer);
export default () => {
  const meta = JSON.parse(readFileSync(new URL('samples.json', here), 'utf8'));
  const x = floats('x.bin'), y = floats('y.bin');
  const size = shape => shape.reduce((a, b) => a * b, 1);
  const per = size(meta.sampleShape);
  const common = { size: meta.size, sampleShape: meta.sampleShape, classes: meta.classes };
  const sample = (index, out, offset) => out.set(x.subarray(index * per, (index + 1) * per), offset);
  if (meta.targetShape) {
    const t = size(meta.targetShape);
    return {
      ...common,
      targetShape: meta.targetShape,
      read: (index, out, offset) => (sample(index, out, offset), 0),
      readTarget: (index, out, offset) => out.set(y.subarray(index * t, (index + 1) * t), offset),
    };
  }
  return {
    ...common,
    read: (index, out, offset) => (sample(index, out, offset), y[index]),
    label: index => y[index],
  };
};
`;

async function writeSamples(dir: string, x: tfNs.Tensor, y: FitY, classes: number): Promise<string> {
  const values = Float32Array.from(x.dataSync() as Float32Array);
  const labels = y.values;
  await writeFile(path.join(dir, 'x.bin'), new Uint8Array(values.buffer));
  await writeFile(path.join(dir, 'y.bin'), new Uint8Array(labels.buffer, labels.byteOffset, labels.byteLength));
  const meta = { size: x.shape[0], sampleShape: x.shape.slice(1), classes, targetShape: y.targetShape };
  await writeFile(path.join(dir, 'samples.json'), JSON.stringify(meta));
  const file = path.join(dir, 'fit-data.mjs');
  await writeFile(file, DATA_MODULE);
  return file;
}
