/**
 * The registry of engines. native, wasm, cpu, tensorflow and webgpu are built in;
 * others register from a plugin module. Nothing outside this registry and
 * the engines' own files asks which backend is running.
 */
import { TandemError } from '../errors.js';
import { NamedRegistry, threadShared } from '../named-registry.js';
import type { Engine } from './engine.js';
import type { AnyOptionTable } from '../options/declaration.js';
import { NATIVE_ENGINE } from './engines/native-engine.js';
import { WASM_ENGINE } from './engines/wasm-engine.js';
import { CPU_ENGINE } from './engines/cpu-engine.js';
import { TENSORFLOW_ENGINE } from './engines/tensorflow-engine.js';
import { WEBGPU_ENGINE } from './engines/webgpu-engine.js';

const engines = new NamedRegistry<Engine>(
  'engine',
  [NATIVE_ENGINE, WASM_ENGINE, CPU_ENGINE, TENSORFLOW_ENGINE, WEBGPU_ENGINE],
  (name, known) =>
    new TandemError(
      'BAD_CONFIG',
      `backend '${name}' is not a registered engine (registered: ${known.join(', ')}); ` +
        'a plugin module that registers it must be listed in `plugins`',
    ),
);

const engineOptions = threadShared('engine-options', () => new Map<string, AnyOptionTable>());

/** `options`: what the engine reads from the train config, declared (flags, `--help`, known keys). */
export function registerEngine(engine: Engine, options?: AnyOptionTable): void {
  engines.register(engine);
  if (options) engineOptions.set(engine.name, options);
}

/** The options registered engines declared, by engine name (the option registry reads them). */
export function engineOptionTables(): ReadonlyMap<string, AnyOptionTable> {
  return engineOptions;
}
export function engineNames(): string[] {
  return engines.names();
}
export function getEngine(name: string): Engine {
  return engines.get(name);
}

/**
 * Throws BACKEND_UNAVAILABLE, with the reason and the fix, when `name` cannot run here. Main thread, before threads
 * start.
 */
export function assertEngineAvailable(name: string): Engine {
  const engine = getEngine(name);
  const why = engine.unavailable();
  if (why) throw new TandemError('BACKEND_UNAVAILABLE', why);
  return engine;
}
