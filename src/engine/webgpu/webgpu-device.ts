/**
 * One thread's WebGPU device: a Dawn instance (npm `webgpu`, Dawn's Node
 * bindings) → its adapter → a GPUDevice → tfjs's `webgpu` backend on that
 * device. Shapes are declared here (structurally, only what tandem touches)
 * rather than taken from @webgpu/types, whose DOM-flavoured globals this
 * project's compiler settings do not carry.
 *
 * Dawn's teardown: a thread or process whose Dawn instance was released
 * (the GPU object dropped, the device destroyed) hangs or crashes at exit
 * while stdout is a pipe (18 of 18 tries; ../shared/reference/webgpu). So the
 * GPU object, adapter and device stay referenced for the thread's life and
 * are never destroyed: a device thread ends by `worker.terminate()` (measured
 * clean with stdout piped), a probe process by `process.exit`.
 */
import type { KernelBackend, Tf } from '../tfjs-types.js';
import type { EngineDevice } from '../engine.js';

interface AdapterInfo {
  vendor?: string;
  architecture?: string;
  device?: string;
  description?: string;
  isFallbackAdapter?: boolean;
}
export interface DawnAdapter {
  readonly info: AdapterInfo;
  readonly limits: Record<string, number>;
  readonly features: { has(name: string): boolean };
  requestDevice(descriptor?: {
    requiredFeatures?: string[];
    requiredLimits?: Record<string, number>;
  }): Promise<DawnDevice>;
}
export interface DawnDevice {
  readonly lost: Promise<{ reason: string; message: string }>;
}
export interface DawnGpu {
  requestAdapter(options?: { powerPreference?: string }): Promise<DawnAdapter | null>;
}
export interface DawnModule {
  create(options: string[]): DawnGpu;
  globals: Record<string, unknown>;
}
interface WebGpuBackendModule {
  WebGPUBackend: new (device: DawnDevice, info: AdapterInfo) => unknown;
}

// Specifiers held in variables: the packages' own typings pull in @webgpu/types (DOM globals).
const DAWN_PACKAGE = 'webgpu';
const TFJS_WEBGPU_PACKAGE = '@tensorflow/tfjs-backend-webgpu';

/** Limits raised from WebGPU's defaults to the adapter's: tfjs's large buffers and workgroups need them. */
const RAISED_LIMITS = [
  'maxComputeWorkgroupStorageSize',
  'maxComputeWorkgroupsPerDimension',
  'maxStorageBufferBindingSize',
  'maxBufferSize',
  'maxComputeWorkgroupSizeX',
  'maxComputeInvocationsPerWorkgroup',
];

export interface OpenedDevice {
  gpu: DawnGpu;
  adapter: DawnAdapter;
  device: DawnDevice;
  description: string;
  engineDevice: EngineDevice;
}

/** This thread's device, referenced until the thread ends (see the teardown note above). */
let opened: OpenedDevice | undefined;

/** A one-line name of an adapter: its description, else vendor and device. */
export function describeAdapter(adapter: DawnAdapter): string {
  const i = adapter.info ?? {};
  return i.description || [i.vendor, i.architecture, i.device].filter(Boolean).join(' ') || 'unnamed adapter';
}

/** Software implementations of Vulkan/WebGPU on the CPU, by the names their adapters report. */
const SOFTWARE_ADAPTERS = /llvmpipe|lavapipe|swiftshader|softpipe/i;

/** The adapter as the engine reports it (name, vendor, driver; whether it is a CPU implementation). */
export function adapterDevice(adapter: DawnAdapter): EngineDevice {
  const i = adapter.info ?? {};
  const name = i.device || i.description || 'unnamed adapter';
  const software =
    i.isFallbackAdapter === true ||
    i.architecture === 'software' ||
    SOFTWARE_ADAPTERS.test(`${i.device} ${i.description}`);
  return { name, vendor: i.vendor ?? '', driver: i.description ?? '', software };
}

/**
 * Dawn's `create()` options for this process: `adapter=<substring>` when the launcher pinned it
 * (`TANDEM_WEBGPU_ADAPTER`, set by `tandem launch --gpus`: src/world/gpu-pinning.ts GPU_ENV.adapter).
 */
export function dawnOptions(env: NodeJS.ProcessEnv = process.env): string[] {
  const adapter = env.TANDEM_WEBGPU_ADAPTER;
  return adapter ? [`adapter=${adapter}`] : [];
}

/** Loads Dawn and installs the WebGPU globals (GPUBufferUsage, …) and `navigator.gpu` on this thread. */
export async function loadDawn(options: string[] = []): Promise<DawnGpu> {
  const dawn = (await import(DAWN_PACKAGE)) as DawnModule;
  Object.assign(globalThis, dawn.globals);
  const gpu = dawn.create(options);
  // tfjs-backend-webgpu registers itself only if navigator.gpu exists when it loads. Node 20 has no navigator.
  Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true, writable: true });
  return gpu;
}

/**
 * Opens this thread's device and makes tfjs's `webgpu` backend run on it (registered under `name`, not yet selected).
 * Idempotent per thread. Undefined when Dawn finds no adapter.
 */
export async function openWebGpuDevice(tf: Tf, name: string): Promise<OpenedDevice | undefined> {
  if (opened) return opened;
  const gpu = await loadDawn(dawnOptions());
  (globalThis as { tandemDawnGpu?: DawnGpu }).tandemDawnGpu = gpu; // held even if no adapter: never released
  const adapter = await gpu.requestAdapter();
  if (!adapter) return undefined;
  const requiredLimits: Record<string, number> = {};
  for (const k of RAISED_LIMITS) if (typeof adapter.limits[k] === 'number') requiredLimits[k] = adapter.limits[k];
  const device = await adapter.requestDevice({
    requiredFeatures: adapter.features.has('timestamp-query') ? ['timestamp-query'] : [],
    requiredLimits,
  });
  const { WebGPUBackend } = (await import(TFJS_WEBGPU_PACKAGE)) as WebGpuBackendModule;
  tf.removeBackend(name);
  tf.registerBackend(name, () => new WebGPUBackend(device, adapter.info) as KernelBackend, 3);
  opened = { gpu, adapter, device, description: describeAdapter(adapter), engineDevice: adapterDevice(adapter) };
  return opened;
}
