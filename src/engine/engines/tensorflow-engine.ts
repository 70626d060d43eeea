/**
 * The `tensorflow` engine: @tensorflow/tfjs-node-gpu or -node, only when the user installed one (its install downloads
 * libtensorflow).
 */
import { createRequire } from 'node:module';
import type { Engine } from '../engine.js';
import { JS_ARITHMETIC } from '../../optim/flat-arithmetic.js';

const require = createRequire(import.meta.url);
const TENSORFLOW_PACKAGES = ['@tensorflow/tfjs-node-gpu', '@tensorflow/tfjs-node'];

/** Which package provides the `tensorflow` engine here, or undefined. */
export function findTensorflowPackage(): string | undefined {
  for (const name of TENSORFLOW_PACKAGES) {
    try {
      require.resolve(name);
      return name;
    } catch {
      /* not installed */
    }
  }
  return undefined;
}

export const TENSORFLOW_ENGINE: Engine = {
  name: 'tensorflow',
  description: '@tensorflow/tfjs-node-gpu or @tensorflow/tfjs-node, when installed',
  capabilities: { synchronousReads: true, parameters: 'host', convInputGradientAsConvolution: true },
  unavailable() {
    return findTensorflowPackage()
      ? undefined
      : "backend 'tensorflow' needs @tensorflow/tfjs-node-gpu or @tensorflow/tfjs-node, and neither is installed. " +
          'Install one (npm install @tensorflow/tfjs-node@4.22.0; it downloads libtensorflow) or use --backend wasm.';
  },
  async start() {
    await import(findTensorflowPackage() as string);
  },
  arithmetic: () => JS_ARITHMETIC,
  // libtensorflow runs kernels on its own thread pool, or on the GPU with tfjs-node-gpu.
  kernelSite: () => (findTensorflowPackage()?.endsWith('-gpu') ? 'accelerator' : 'engine-threads'),
};
