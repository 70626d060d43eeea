/**
 * The module a new thread of tandem's (or the command line) starts on: the bundle the build wrote beside its entry
 * (`compute-worker.js` → `compute-worker.bundle.js`, tools/bundle-entries.mjs), else the entry itself.
 * A bundle loads tandem's ~150 modules as one file: a small 2-device fit's threads start on ~15% less CPU here
 * (`npm run bench -- startup`).
 *
 * A bundle older than the last compile (`dist/tsconfig.tsbuildinfo`, absent from an installed package) is stale:
 * the entry is used. `TANDEM_BUNDLES=0` uses the entries always (to compare, or to debug module by module).
 * A thread or process started on a bundle has `globalThis[Symbol.for('tandem.bundle')]` set to its entry
 * (`actors/compute-worker.js`).
 *
 * @example
 * new Worker(bundledEntry(entryUrl), { ...workerFlags() }); // entryUrl: compute-worker.js's file: URL
 */
import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const BUNDLES_ENV = 'TANDEM_BUNDLES';

/** The build's last compile: a bundle older than it is stale. */
const COMPILED = new URL('../tsconfig.tsbuildinfo', import.meta.url);

const chosen = new Map<string, URL>();

/**
 * The URL to start a thread on for the entry module `entry` (a file: URL ending in `.js`); `compiled`: the file whose
 * time is the last compile's.
 */
export function bundledEntry(entry: URL, env: NodeJS.ProcessEnv = process.env, compiled: URL = COMPILED): URL {
  if (env[BUNDLES_ENV] === '0' || !entry.pathname.endsWith('.js')) return entry;
  const key = `${entry.href} ${compiled.href}`;
  let url = chosen.get(key);
  if (url === undefined) {
    const bundle = new URL(entry.href.replace(/\.js$/, '.bundle.js'));
    const written = mtimeOf(bundle);
    const last = mtimeOf(compiled);
    url = written !== undefined && (last === undefined || written >= last) ? bundle : entry;
    chosen.set(key, url);
  }
  return url;
}

function mtimeOf(file: URL): number | undefined {
  try {
    return statSync(fileURLToPath(file)).mtimeMs;
  } catch {
    return undefined;
  }
}
