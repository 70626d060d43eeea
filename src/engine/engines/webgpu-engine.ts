/**
 * The `webgpu` engine: tfjs-backend-webgpu on a GPUDevice from Dawn's Node
 * bindings (npm `webgpu`), one Dawn instance and device per device thread.
 * Reads are asynchronous only (`dataSync()` throws in Node): the device
 * thread's hot path awaits `data()` (capability `synchronousReads: false`).
 * Developed on Mesa's software Vulkan (llvmpipe): a correctness rig.
 */
import type { Engine } from '../engine.js';
import { JS_ARITHMETIC } from '../../optim/flat-arithmetic.js';
import { probeWebGpu } from '../webgpu/webgpu-availability.js';
import { openWebGpuDevice } from '../webgpu/webgpu-device.js';

export const WEBGPU_ENGINE: Engine = {
  name: 'webgpu',
  description: 'tfjs-backend-webgpu on Dawn (npm webgpu): a GPU through its Vulkan driver, asynchronous reads',
  capabilities: { synchronousReads: false, parameters: 'host', convInputGradientAsConvolution: true },
  unavailable() {
    const probe = probeWebGpu();
    return probe.kind === 'ok' ? undefined : `backend 'webgpu' is not available: ${probe.reason}; or use --backend native, wasm or cpu.`;
  },
  async start(tf) {
    await openWebGpuDevice(tf, 'webgpu');
  },
  arithmetic: () => JS_ARITHMETIC,
  kernelSite: () => 'accelerator',
};
