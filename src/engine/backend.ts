/**
 * Compute backends a device can run on, and how each is started inside a worker.
 * `wasm` (default: SIMD, one thread per engine), `cpu` (pure JS), and
 * `tensorflow` (@tensorflow/tfjs-node-gpu or -node, only when the user installed it).
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { TandemError } from '../errors.js';
import { installFastGradients } from './fast-gradients.js';
import type { Tf } from './tfjs-types.js';

export const BACKENDS = ['wasm', 'cpu', 'tensorflow'] as const;
export type BackendName = (typeof BACKENDS)[number];

const require = createRequire(import.meta.url);
const TENSORFLOW_PACKAGES = ['@tensorflow/tfjs-node-gpu', '@tensorflow/tfjs-node'];

/** Which package provides the `tensorflow` backend here, or undefined. Checked before any thread starts. */
export function findTensorflowPackage(): string | undefined {
  for (const name of TENSORFLOW_PACKAGES) {
    try {
      require.resolve(name);
      return name;
    } catch { /* not installed */ }
  }
  return undefined;
}

/** Throws a clear error when `name` cannot run on this machine. Main thread, before threads start. */
export function assertBackendAvailable(name: BackendName): void {
  if (name === 'tensorflow' && !findTensorflowPackage()) {
    throw new TandemError('BACKEND_UNAVAILABLE',
      "backend 'tensorflow' needs @tensorflow/tfjs-node-gpu or @tensorflow/tfjs-node, and neither is installed. " +
      "Install one (npm install @tensorflow/tfjs-node@4.22.0; it downloads libtensorflow) or use --backend wasm.");
  }
}

/** Starts `name` on this thread's tfjs and installs tandem's faster gradients. Worker side. */
export async function startBackend(tf: Tf, name: BackendName): Promise<void> {
  switch (name) {
    case 'wasm': {
      const wasm = await import('@tensorflow/tfjs-backend-wasm');
      const dir = path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-simd.wasm'));
      wasm.setWasmPaths(dir + path.sep);
      // Threaded wasm does not start in Node: one SIMD thread per engine.
      tf.env().set('WASM_HAS_MULTITHREAD_SUPPORT', false);
      break;
    }
    case 'cpu':
      break;
    case 'tensorflow': {
      const pkg = findTensorflowPackage();
      if (!pkg) assertBackendAvailable(name);
      await import(pkg as string);
      break;
    }
    default: {
      const never: never = name;
      throw new TandemError('BAD_CONFIG', `unknown backend '${String(never)}'`);
    }
  }
  const ok = await tf.setBackend(name);
  if (!ok) throw new TandemError('BACKEND_UNAVAILABLE', `backend '${name}' failed to start on this thread`);
  await tf.ready();
  installFastGradients(tf, name);
}
