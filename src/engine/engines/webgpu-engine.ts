/**
 * The `webgpu` engine: tfjs-backend-webgpu on a GPUDevice from Dawn's Node
 * bindings (npm `webgpu`), one Dawn instance and device per device thread.
 * Reads are asynchronous only (`dataSync()` throws in Node): the device
 * thread's hot path awaits `data()` (capability `synchronousReads: false`).
 * Developed on Mesa's software Vulkan (llvmpipe): a correctness rig.
 */
import type { Engine } from '../engine.js';
import { JS_ARITHMETIC } from '../../optim/flat-arithmetic.js';
import { isMainThread } from 'node:worker_threads';
import { TandemError } from '../../errors.js';
import { probeWebGpu, probeWebGpuPackage, WEBGPU_DRIVER_HOW_TO } from '../webgpu/webgpu-availability.js';
import { openWebGpuDevice } from '../webgpu/webgpu-device.js';

export const WEBGPU_ENGINE: Engine = {
  name: 'webgpu',
  description: 'tfjs-backend-webgpu on Dawn (npm webgpu): a GPU through its Vulkan driver, asynchronous reads',
  capabilities: { synchronousReads: false, parameters: 'host', convInputGradientAsConvolution: true },
  unavailable() {
    // The main thread asks before threads start; a device thread does not ask again (a probe process per thread):
    // its start() opens the device and says what is missing if that fails.
    const probe = isMainThread ? probeWebGpu() : probeWebGpuPackage();
    return probe.kind === 'ok' ? undefined : unavailableMessage(probe.reason);
  },
  async start(tf) {
    const opened = await openWebGpuDevice(tf, 'webgpu');
    if (!opened)
      throw new TandemError(
        'BACKEND_UNAVAILABLE',
        unavailableMessage(`Dawn found no WebGPU adapter on this device thread; ${WEBGPU_DRIVER_HOW_TO}`),
      );
    return opened.engineDevice;
  },
  arithmetic: () => JS_ARITHMETIC,
  kernelSite: () => 'accelerator',
};

function unavailableMessage(reason: string): string {
  return `backend 'webgpu' is not available: ${reason}; or use --backend native, wasm or cpu.`;
}
