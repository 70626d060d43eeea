/**
 * Reads a TensorFlow.js layers model from disk (model.json + its weights
 * files) and checks it before tfjs sees it: the JSON is complete, it has a
 * topology and a weights manifest of the expected shape, every weights file
 * is there, and their bytes are exactly what the manifest describes. Each
 * failure is a BAD_MODEL error naming the file, what was expected and what
 * was found.
 */
import { open, realpath } from 'node:fs/promises';
import path from 'node:path';
import { TandemError } from '../errors.js';
import { fsReason } from '../output/fs-reason.js';
import { readRegularFile } from '../read-regular-file.js';
import type { NamedValues } from '../optim/optimizer-weights.js';

export interface WeightSpec {
  name: string;
  shape: number[];
  dtype: string;
  quantization?: { dtype: string };
  /** 'optimizer': the optimizer's state, which `model.save({ includeOptimizer: true })` appends. */
  group?: string;
}
export interface LayersModelFiles {
  modelTopology: object;
  weightSpecs: WeightSpec[];
  weightData: ArrayBuffer;
}

const EXPECTED =
  'a TensorFlow.js layers model (JSON with "modelTopology" and "weightsManifest", as model.save or tandem --out ' +
  'write it)';
const BYTES: Record<string, number> = { float32: 4, int32: 4, bool: 1, complex64: 8, uint8: 1, uint16: 2, float16: 2 };

function bad(file: string, message: string, cause?: unknown): never {
  throw new TandemError(
    'BAD_MODEL',
    `model ${file}: ${message}`,
    undefined,
    cause === undefined ? undefined : { cause },
  );
}

export async function readLayersModelFiles(modelJsonPath: string): Promise<LayersModelFiles> {
  const json = await readModelJson(modelJsonPath);
  const manifest = checkManifest(modelJsonPath, json.weightsManifest);
  const weightSpecs = manifest.flatMap(g => g.weights);
  const expected = expectedBytes(modelJsonPath, weightSpecs);
  const dir = await realpath(path.dirname(modelJsonPath));
  const paths = manifest.flatMap(g => g.paths);
  const buffers: Buffer[] = [];
  let total = 0;
  for (const p of paths) {
    // Read at most what the manifest still describes, and one byte more to see a file too long.
    const buf = await readWeightsFile(modelJsonPath, dir, p, expected - total + 1);
    buffers.push(buf);
    total += buf.length;
    if (total > expected) break;
  }
  if (expected !== total) {
    bad(
      modelJsonPath,
      `the weights (${paths.join(', ')}) hold ${total > expected ? `more than ${expected}` : total} bytes, but ` +
        `weightsManifest describes ${weightSpecs.length} weights of ${expected} bytes ` +
        `(${total < expected ? 'truncated' : 'too long'}, or the weights of another model)`,
    );
  }
  const all = Buffer.concat(buffers, total);
  return {
    modelTopology: json.modelTopology as object,
    weightSpecs,
    weightData: all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength),
  };
}

/**
 * Weights file `p` of the manifest: a relative path inside the model's directory `dir` (its real path), a regular
 * file, read up to `most` bytes. A model from elsewhere is data: it never reads a file outside its directory
 * (`../../etc/passwd`, a symbolic link out) nor a device (`/dev/zero`).
 */
async function readWeightsFile(modelJsonPath: string, dir: string, p: string, most: number): Promise<Buffer> {
  const where = `its weights file ${path.join(path.dirname(modelJsonPath), p)} (listed in weightsManifest)`;
  if (path.isAbsolute(p) || p.includes('\0') || path.normalize(p).split(/[\\/]/).includes('..'))
    bad(modelJsonPath, `${where} is not a path inside the model's directory: give a relative path such as weights.bin`);
  const file = path.join(dir, p);
  const fail = (err: unknown): never => bad(modelJsonPath, `${where} cannot be read: ${fsReason(err)}`, err);
  const real = await realpath(file).catch(fail);
  if (path.relative(dir, real).split(path.sep).includes('..') || path.isAbsolute(path.relative(dir, real)))
    bad(
      modelJsonPath,
      `${where} leads outside the model's directory (to ${real}): weights files live beside model.json`,
    );
  const handle = await open(real, 'r').catch(fail);
  try {
    if (!(await handle.stat()).isFile()) bad(modelJsonPath, `${where} is not a regular file (${real})`);
    const buf = Buffer.allocUnsafe(Math.max(0, most));
    let at = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buf, at, buf.length - at, null).catch(fail);
      if (bytesRead === 0 || (at += bytesRead) === buf.length) break;
    }
    return buf.subarray(0, at);
  } finally {
    await handle.close();
  }
}

/** How a Keras model becomes a model tandem trains, for the refusals that name it. */
export const KERAS_CONVERSION =
  'tensorflowjs_converter --input_format keras --output_format tfjs_layers_model model.h5 out_dir';

/** The longest model.json read: its topology and manifest are text (and V8's strings end near 512 MiB). */
export const MAX_MODEL_JSON_BYTES = 2 ** 29;

async function readModelJson(file: string): Promise<{ modelTopology?: unknown; weightsManifest?: unknown }> {
  const text = (
    await readRegularFile(file, MAX_MODEL_JSON_BYTES).catch((err: unknown) =>
      bad(file, `cannot read it: ${fsReason(err)}`, err),
    )
  ).toString('utf8');
  if (text.trim() === '') bad(file, `expected ${EXPECTED}, found an empty file`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    bad(
      file,
      `expected ${EXPECTED}, found invalid JSON (${(err as Error).message}; the file has ${text.length} characters: ` +
        `truncated?)`,
    );
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    bad(file, `expected ${EXPECTED}, found ${json === null ? 'null' : Array.isArray(json) ? 'an array' : typeof json}`);
  const o = json as { modelTopology?: unknown; weightsManifest?: unknown; format?: unknown };
  if (o.format === 'graph-model' || Array.isArray((o.modelTopology as { node?: unknown } | null)?.node))
    bad(
      file,
      'it is a TensorFlow.js graph model (a frozen TensorFlow graph, for tf.loadGraphModel and inference), which ' +
        'neither tfjs nor tandem can train; convert the Keras model to a layers model instead ' +
        `(${KERAS_CONVERSION}) and give its model.json`,
    );
  if (o.modelTopology === null || typeof o.modelTopology !== 'object') {
    bad(
      file,
      `expected ${EXPECTED}, found ` +
        (o.modelTopology === undefined ? 'no "modelTopology"' : `"modelTopology": ${JSON.stringify(o.modelTopology)}`) +
        ` (keys: ${Object.keys(o).join(', ') || 'none'})`,
    );
  }
  return o;
}

function checkManifest(file: string, manifest: unknown): { paths: string[]; weights: WeightSpec[] }[] {
  const shape = '"weightsManifest": [{ "paths": ["weights.bin"], "weights": [{ "name", "shape", "dtype" }, …] }]';
  if (!Array.isArray(manifest))
    bad(
      file,
      `expected ${shape}, found ` +
        `${manifest === undefined ? 'no "weightsManifest"' : JSON.stringify(manifest).slice(0, 80)}`,
    );
  manifest.forEach((g: { paths?: unknown; weights?: unknown }, i) => {
    if (!g || !Array.isArray(g.paths) || g.paths.some(p => typeof p !== 'string' || p === ''))
      bad(file, `weightsManifest[${i}].paths: expected a list of file names, found ${JSON.stringify(g?.paths)}`);
    if (!Array.isArray(g.weights))
      bad(
        file,
        `weightsManifest[${i}].weights: expected a list of { name, shape, dtype }, found ${JSON.stringify(g.weights)}`,
      );
    g.weights.forEach((w: Partial<WeightSpec>, j: number) => {
      if (
        !w ||
        typeof w.name !== 'string' ||
        !Array.isArray(w.shape) ||
        w.shape.some(d => !Number.isSafeInteger(d) || d < 0) ||
        typeof w.dtype !== 'string'
      ) {
        bad(
          file,
          `weightsManifest[${i}].weights[${j}]: expected { name, shape: [non-negative integers], dtype }, found ` +
            `${JSON.stringify(w)}`,
        );
      }
    });
  });
  return manifest as { paths: string[]; weights: WeightSpec[] }[];
}

/** The most bytes a model's weights may take (a Buffer's bound). */
const MAX_WEIGHT_BYTES = 2 ** 32;

/** Bytes the weights take, every size checked against overflow; BAD_MODEL naming a weight of an unknown dtype. */
function expectedBytes(file: string, specs: WeightSpec[]): number {
  let total = 0;
  for (const [i, s] of specs.entries()) {
    const dtype = s.quantization?.dtype ?? s.dtype;
    const per = Object.hasOwn(BYTES, dtype) ? BYTES[dtype] : undefined;
    if (per === undefined)
      bad(
        file,
        `weight ${i} (${JSON.stringify(s.name)}) has dtype ${JSON.stringify(dtype)}: expected one of ` +
          `${Object.keys(BYTES).join(', ')}`,
      );
    let bytes = per;
    for (const d of s.shape) {
      bytes *= d;
      if (!Number.isSafeInteger(bytes) || bytes > MAX_WEIGHT_BYTES)
        bad(file, `weight ${i} (${JSON.stringify(s.name)}) of shape [${s.shape.join(', ')}] is over 4 GiB`);
    }
    total += bytes;
    if (total > MAX_WEIGHT_BYTES) bad(file, `the weights take over 4 GiB (weight ${i} included)`);
  }
  return total;
}

/**
 * The model's own weights apart from the optimizer's state (the weights of group 'optimizer', decoded: tfjs writes
 * them float32, and the iterations int32), as tfjs's loader splits them.
 */
export function splitOptimizerWeights(
  file: string,
  files: LayersModelFiles,
): { model: LayersModelFiles; optimizer: NamedValues[] } {
  const specs: WeightSpec[] = [];
  const parts: Uint8Array[] = [];
  const optimizer: NamedValues[] = [];
  let at = 0;
  for (const [i, s] of files.weightSpecs.entries()) {
    const bytes = BYTES[s.quantization?.dtype ?? s.dtype] * s.shape.reduce((a, b) => a * b, 1);
    const part = new Uint8Array(files.weightData, at, bytes);
    at += bytes;
    if (s.group !== 'optimizer') {
      specs.push(s);
      parts.push(part);
    } else if (s.quantization || (s.dtype !== 'float32' && s.dtype !== 'int32')) {
      bad(
        file,
        `optimizer weight ${i} (${JSON.stringify(s.name)}) is ${s.quantization?.dtype ?? s.dtype}: ` +
          "tfjs saves an optimizer's state as float32 (its iterations int32)",
      );
    } else {
      const copy = part.slice().buffer;
      optimizer.push({
        name: s.name,
        shape: s.shape,
        values: s.dtype === 'int32' ? new Int32Array(copy) : new Float32Array(copy),
      });
    }
  }
  if (optimizer.length === 0) return { model: files, optimizer };
  const data = Buffer.concat(parts);
  const weightData = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
  return { model: { modelTopology: files.modelTopology, weightSpecs: specs, weightData }, optimizer };
}
