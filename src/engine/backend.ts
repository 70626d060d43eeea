/**
 * Starting an engine on a thread, and the default choice. The engines
 * themselves — `native` (default when the oneDNN addon was built), `wasm`
 * (default otherwise), `cpu`, `tensorflow` (only when the user installed
 * tfjs-node) and any a plugin registers — live in the engine registry.
 */
import { TandemError } from '../errors.js';
import { installFastGradients } from './fast-gradients.js';
import { assertEngineAvailable, engineNames, getEngine } from './engine-registry.js';
import type { FlatArithmetic } from '../optim/flat-arithmetic.js';
import { NATIVE_ENGINE } from './engines/native-engine.js';
import { loadNativeAddon, NATIVE_HOW_TO } from './native/native-addon.js';
import type { EngineDevice, EngineStartOptions, KernelSite } from './engine.js';
import type { Tf } from './tfjs-types.js';
import { muteCpuGreeting } from './quiet-cpu.js';
export { findTensorflowPackage } from './engines/tensorflow-engine.js';

export { BACKENDS, type BackendName } from './engine-options.js';
import type { BackendName, Precision } from './engine-options.js';

let noticeShown = false;

/**
 * The backend a run gets when its config names none: `TANDEM_BACKEND` when set,
 * else `native` when the addon loaded, else `wasm` with a one-line notice (once per process).
 */
export function defaultBackend(): BackendName {
  const fromEnv = process.env.TANDEM_BACKEND;
  if (fromEnv) {
    if (!engineNames().includes(fromEnv)) {
      throw new TandemError(
        'BAD_CONFIG',
        `TANDEM_BACKEND='${fromEnv}' is not a backend; use one of ${engineNames().join(', ')}`,
      );
    }
    return fromEnv;
  }
  if (NATIVE_ENGINE.unavailable() === undefined) return 'native';
  if (!noticeShown) {
    noticeShown = true;
    const load = loadNativeAddon();
    process.stderr.write(
      `tandem: native kernels unavailable (${load.loaded ? '' : load.reason}); using wasm. For the fast path, ` +
        `${NATIVE_HOW_TO}.\n`,
    );
  }
  return 'wasm';
}

/** Throws a clear error when `name` cannot run on this machine. Main thread, before threads start. */
export function assertBackendAvailable(name: BackendName): void {
  assertEngineAvailable(name);
}

/**
 * Throws PRECISION_UNAVAILABLE, naming what is missing, when engine `name` cannot multiply in `precision` here. Main
 * thread, before threads start.
 */
export function assertPrecisionAvailable(name: BackendName, precision: Precision): void {
  if (precision === 'fp32') return;
  const engine = getEngine(name);
  const why = engine.precisionUnavailable
    ? engine.precisionUnavailable(precision)
    : `precision ${precision} runs on the native engine only (backend '${name}' multiplies in float32); ` +
      `use --backend native, or --precision fp32`;
  if (why) throw new TandemError('PRECISION_UNAVAILABLE', why);
}

/** What engine `name` multiplies in with `precision` here, as the run's header says it: `bf16 (oneDNN …)`. */
export function precisionLabel(name: BackendName, precision: Precision): string {
  const kernels = precision === 'fp32' ? undefined : getEngine(name).precisionKernels?.(precision);
  return kernels ? `${precision} (${kernels})` : precision;
}

export type BackendOptions = EngineStartOptions;

/** The start options of a run's engine, from its config (its fields of the same names). */
export function engineStartOptions(c: Required<EngineStartOptions>): BackendOptions {
  return { nativeThreads: c.nativeThreads, precision: c.precision, pluginOptions: c.pluginOptions };
}

/**
 * Starts engine `name` on this thread's tfjs and installs tandem's faster gradients. Worker side.
 * Resolves with the accelerator the engine opened (a GPU adapter), when it runs on one.
 */
export async function startBackend(
  tf: Tf,
  name: BackendName,
  options: BackendOptions = {},
): Promise<EngineDevice | undefined> {
  const engine = assertEngineAvailable(name);
  assertPrecisionAvailable(name, options.precision ?? 'fp32');
  const device = (await engine.start(tf, options)) ?? undefined;
  const ok = await tf.setBackend(name);
  if (!ok) throw new TandemError('BACKEND_UNAVAILABLE', `backend '${name}' failed to start on this thread`);
  await tf.ready();
  muteCpuGreeting(tf);
  installFastGradients(tf, name, {
    convInputGradientAsConvolution: engine.capabilities.convInputGradientAsConvolution,
  });
  return device;
}

/**
 * The comm-side arithmetic of a device training on `backend`: its engine's (native loops for native, the JS ones
 * otherwise).
 */
export function flatArithmeticFor(backend: BackendName): FlatArithmetic {
  return getEngine(backend).arithmetic();
}

/** Where `backend`'s kernels run when started with `options` (an engine that does not say: its own threads). */
export function kernelSiteOf(backend: BackendName, options: BackendOptions = {}): KernelSite {
  return getEngine(backend).kernelSite?.(options) ?? 'engine-threads';
}
