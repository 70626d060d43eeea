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
import { importUserModule } from '../data/import-user-module.js';

const loaded = new Map<string, Promise<void>>();

export function loadPlugins(urls: readonly string[]): Promise<void> {
  return urls.reduce((before, url) => before.then(() => loadPlugin(url)), Promise.resolve());
}

function loadPlugin(url: string): Promise<void> {
  let p = loaded.get(url);
  if (!p) {
    p = importUserModule(url, 'plugin').then(
      () => undefined,
      (err: unknown) => {
        loaded.delete(url);
        throw err; // BAD_CONFIG naming the plugin's file (and the line of a syntax error)
      },
    );
    loaded.set(url, p);
  }
  return p;
}
