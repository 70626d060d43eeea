/** The `native` engine: tfjs's cpu backend with oneDNN/C++ kernels (native/), and the addon's comm-side arithmetic. */
import type { Engine } from '../engine.js';
import { loadNativeAddon, NATIVE_HOW_TO } from '../native/native-addon.js';
import { fuseConvLayers } from '../native/fused-conv-layers.js';
import { bf16Support } from '../native/bf16-support.js';
import { WEIGHT_SHADOWS } from '../native/bf16-shadows.js';
import { ownFloats } from '../host-floats.js';
import { nativeArithmetic } from '../../optim/flat-arithmetic.js';

export const NATIVE_ENGINE: Engine = {
  name: 'native',
  description: "tfjs's cpu backend with oneDNN kernels (default when the addon was built)",
  capabilities: { synchronousReads: true, parameters: 'host', convInputGradientAsConvolution: false },
  unavailable() {
    const load = loadNativeAddon();
    return load.loaded
      ? undefined
      : `backend 'native' is not available: ${load.reason}. To get it, ${NATIVE_HOW_TO}; or use --backend wasm.`;
  },
  precisionUnavailable(precision) {
    if (precision === 'fp32') return undefined;
    const load = loadNativeAddon();
    return load.loaded ? bf16Support(load.addon).refusal : this.unavailable();
  },
  precisionKernels(precision) {
    const load = loadNativeAddon();
    if (precision === 'fp32' || !load.loaded) return undefined;
    const s = bf16Support(load.addon);
    return `oneDNN ${s.implementation || 'none'}${s.flags.length > 0 ? ` on ${s.flags.join(', ')}` : ''}`;
  },
  async start(tf, options) {
    // imported here: a comm thread reads this engine for its arithmetic alone, and the backend loads tfjs's cpu backend
    const { registerNativeBackend } = await import('../native/native-backend.js');
    registerNativeBackend(tf, { threads: options.nativeThreads, precision: options.precision });
  },
  arithmetic: nativeArithmetic,
  // One OpenMP thread: a parallel region runs on the calling thread (measured: no thread is added). More: a pool.
  kernelSite: options => ((options.nativeThreads ?? 1) === 1 ? 'calling-thread' : 'engine-threads'),
  prepareModel(tf, model, options) {
    if (options.nativeFusion) fuseConvLayers(tf, model);
  },
  stepScope: (tf, model, mirror) => {
    const load = loadNativeAddon();
    if (!load.loaded || load.addon.getPrecision() !== 'bf16') return () => undefined;
    const arrays = model.trainableWeights.map(w => ownFloats(tf, w.read()));
    return WEIGHT_SHADOWS.begin(
      arrays.filter((a): a is Float32Array => a !== undefined),
      mirror,
    );
  },
};
