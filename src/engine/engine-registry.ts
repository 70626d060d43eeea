/**
 * The registry of engines (tfjs-core's registry habit: config objects by
 * name, duplicates refused). native, wasm, cpu and tensorflow are built in;
 * others register from a plugin module. Nothing outside this registry and
 * the engines' own files asks which backend is running.
 */
import { TandemError } from '../errors.js';
import type { Engine } from './engine.js';
import { NATIVE_ENGINE } from './engines/native-engine.js';
import { WASM_ENGINE } from './engines/wasm-engine.js';
import { CPU_ENGINE } from './engines/cpu-engine.js';
import { TENSORFLOW_ENGINE } from './engines/tensorflow-engine.js';

const engines = new Map<string, Engine>([NATIVE_ENGINE, WASM_ENGINE, CPU_ENGINE, TENSORFLOW_ENGINE].map(e => [e.name, e]));

export function registerEngine(engine: Engine): void {
  if (engines.has(engine.name)) throw new TandemError('BAD_CONFIG', `an engine named '${engine.name}' is already registered; give yours another name`);
  engines.set(engine.name, engine);
}

export function engineNames(): string[] {
  return [...engines.keys()];
}

export function getEngine(name: string): Engine {
  const e = engines.get(name);
  if (!e) {
    throw new TandemError('BAD_CONFIG', `backend '${name}' is not a registered engine (registered: ${engineNames().join(', ')}); ` +
      'a plugin module that registers it must be listed in `plugins`');
  }
  return e;
}

/** Throws BACKEND_UNAVAILABLE, with the reason and the fix, when `name` cannot run here. Main thread, before threads start. */
export function assertEngineAvailable(name: string): Engine {
  const engine = getEngine(name);
  const why = engine.unavailable();
  if (why) throw new TandemError('BACKEND_UNAVAILABLE', why);
  return engine;
}
