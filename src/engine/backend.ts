/**
 * Compute backends a device can run on, and how each is started inside a worker.
 * `native` (default when the oneDNN addon was built: tfjs's cpu backend with
 * oneDNN/C++ kernels), `wasm` (default otherwise: SIMD, one thread per engine),
 * `cpu` (pure JS), and `tensorflow` (@tensorflow/tfjs-node-gpu or -node, only
 * when the user installed it).
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { TandemError } from '../errors.js';
import { installFastGradients } from './fast-gradients.js';
import { loadNativeAddon, NATIVE_HOW_TO, requireNativeAddon } from './native/native-addon.js';
import { registerNativeBackend } from './native/native-backend.js';
import type { Tf } from './tfjs-types.js';

export const BACKENDS = ['native', 'wasm', 'cpu', 'tensorflow'] as const;
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

let noticeShown = false;

/**
 * The backend a run gets when its config names none: `TANDEM_BACKEND` when set,
 * else `native` when the addon loaded, else `wasm` with a one-line notice (once per process).
 */
export function defaultBackend(): BackendName {
  const fromEnv = process.env.TANDEM_BACKEND;
  if (fromEnv) {
    if (!(BACKENDS as readonly string[]).includes(fromEnv)) {
      throw new TandemError('BAD_CONFIG', `TANDEM_BACKEND='${fromEnv}' is not a backend; use one of ${BACKENDS.join(', ')}`);
    }
    return fromEnv as BackendName;
  }
  const load = loadNativeAddon();
  if (load.loaded) return 'native';
  if (!noticeShown) {
    noticeShown = true;
    process.stderr.write(`tandem: native kernels unavailable (${load.reason}); using wasm. For the fast path, ${NATIVE_HOW_TO}.\n`);
  }
  return 'wasm';
}

/** Throws a clear error when `name` cannot run on this machine. Main thread, before threads start. */
export function assertBackendAvailable(name: BackendName): void {
  if (name === 'native') requireNativeAddon();
  if (name === 'tensorflow' && !findTensorflowPackage()) {
    throw new TandemError('BACKEND_UNAVAILABLE',
      "backend 'tensorflow' needs @tensorflow/tfjs-node-gpu or @tensorflow/tfjs-node, and neither is installed. " +
      "Install one (npm install @tensorflow/tfjs-node@4.22.0; it downloads libtensorflow) or use --backend wasm.");
  }
}

export interface BackendOptions {
  /** OpenMP threads of the native backend on this thread (default 1). */
  nativeThreads?: number;
}

/** Starts `name` on this thread's tfjs and installs tandem's faster gradients. Worker side. */
export async function startBackend(tf: Tf, name: BackendName, options: BackendOptions = {}): Promise<void> {
  switch (name) {
    case 'native':
      registerNativeBackend(tf, { threads: options.nativeThreads });
      break;
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
