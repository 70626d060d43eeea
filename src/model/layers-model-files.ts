/**
 * Reads a TensorFlow.js layers model from disk (model.json + its weights
 * files) and checks it before tfjs sees it: the JSON is complete, it has a
 * topology and a weights manifest of the expected shape, every weights file
 * is there, and their bytes are exactly what the manifest describes. Each
 * failure is a BAD_MODEL error naming the file, what was expected and what
 * was found.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { TandemError } from '../errors.js';
import { fsReason } from '../output/fs-reason.js';

export interface WeightSpec {
  name: string;
  shape: number[];
  dtype: string;
  quantization?: { dtype: string };
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
  const dir = path.dirname(modelJsonPath);
  const buffers: Buffer[] = [];
  for (const p of manifest.flatMap(g => g.paths)) {
    const file = path.join(dir, p);
    buffers.push(
      await readFile(file).catch((err: unknown) =>
        bad(
          modelJsonPath,
          `its weights file ${file} (listed in weightsManifest) cannot be read: ${fsReason(err)}`,
          err,
        ),
      ),
    );
  }
  const all = Buffer.concat(buffers);
  const weightSpecs = manifest.flatMap(g => g.weights);
  const expected = expectedBytes(weightSpecs);
  if (expected !== undefined && expected !== all.byteLength) {
    const files = manifest.flatMap(g => g.paths).join(', ');
    bad(
      modelJsonPath,
      `the weights (${files}) hold ${all.byteLength} bytes, but weightsManifest describes ${weightSpecs.length} ` +
        `weights of ${expected} bytes ` +
        `(${all.byteLength < expected ? 'truncated' : 'too long'}, or the weights of another model)`,
    );
  }
  return {
    modelTopology: json.modelTopology as object,
    weightSpecs,
    weightData: all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength),
  };
}

async function readModelJson(file: string): Promise<{ modelTopology?: unknown; weightsManifest?: unknown }> {
  const text = await readFile(file, 'utf8').catch((err: unknown) => bad(file, `cannot read it: ${fsReason(err)}`, err));
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
  const o = json as { modelTopology?: unknown; weightsManifest?: unknown };
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
        w.shape.some(d => !Number.isInteger(d) || d < 0) ||
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

/** Bytes the weights take, or undefined where that cannot be known ahead (strings). */
function expectedBytes(specs: WeightSpec[]): number | undefined {
  let total = 0;
  for (const s of specs) {
    const per = BYTES[s.quantization?.dtype ?? s.dtype];
    if (per === undefined) return undefined;
    total += per * s.shape.reduce((a, b) => a * b, 1);
  }
  return total;
}
