/**
 * Plugin modules: ES modules that register a transport, a method or an
 * engine when they load. Every thread of a run loads the run's plugins
 * before it does anything else (registries are per thread), in the order
 * given, once per thread.
 *
 * @example
 * // my-transport.mjs
 * import { registerTransport } from 'tandem';
 * registerTransport({ name: 'my-transport', … });
 * // config: { transport: 'my-transport', plugins: ['./my-transport.mjs'] }
 */
import { TandemError } from '../errors.js';

const loaded = new Map<string, Promise<void>>();

export function loadPlugins(urls: readonly string[]): Promise<void> {
  return urls.reduce((before, url) => before.then(() => loadPlugin(url)), Promise.resolve());
}

function loadPlugin(url: string): Promise<void> {
  let p = loaded.get(url);
  if (!p) {
    p = import(url).then(() => undefined, (err: unknown) => {
      loaded.delete(url);
      throw new TandemError('BAD_CONFIG', `plugin ${url} failed to load: ${err instanceof Error ? err.message : String(err)}`, undefined, { cause: err });
    });
    loaded.set(url, p);
  }
  return p;
}
