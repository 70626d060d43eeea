/**
 * The `wasm` engine: @tensorflow/tfjs-backend-wasm, SIMD, one thread per engine (the default without the native addon).
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Engine } from '../engine.js';
import { JS_ARITHMETIC } from '../../optim/flat-arithmetic.js';

const require = createRequire(import.meta.url);

export const WASM_ENGINE: Engine = {
  name: 'wasm',
  description: 'tfjs-backend-wasm (SIMD, one thread per device)',
  capabilities: { synchronousReads: true, parameters: 'host', convInputGradientAsConvolution: true },
  unavailable: () => undefined,
  async start(tf) {
    const wasm = await import('@tensorflow/tfjs-backend-wasm');
    const dir = path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-simd.wasm'));
    wasm.setWasmPaths(dir + path.sep);
    // Threaded wasm does not start in Node: one SIMD thread per engine.
    tf.env().set('WASM_HAS_MULTITHREAD_SUPPORT', false);
  },
  arithmetic: () => JS_ARITHMETIC,
  kernelSite: () => 'calling-thread',
};
