/**
 * Loading one of tandem's native addons (native, gloo, shm) from its built path: what came of it, with the reason
 * a user reads when it did not load (not built, out of date, failed to load). Each addon's file caches the result
 * per thread and says how to get it.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

export type AddonLoad<T> =
  | { loaded: true; addon: T; path: string }
  | { loaded: false; reason: string; path: string };

const require = createRequire(import.meta.url);

/**
 * Loads the addon `name` at `path`; `outdated` tells what a current build lacks (undefined: nothing), e.g.
 * `missing conv2dForward`, or '' when an old build is known only by a missing entry.
 */
export function loadAddonAt<T>(name: string, path: string, outdated: (addon: Partial<T>) => string | undefined): AddonLoad<T> {
  if (!existsSync(path)) return { loaded: false, path, reason: `the ${name} addon was not built (${path} is missing)` };
  try {
    const addon = require(path) as Partial<T>;
    const lacks = outdated(addon);
    return lacks === undefined
      ? { loaded: true, path, addon: addon as T }
      : { loaded: false, path, reason: `the ${name} addon at ${path} is out of date${lacks ? ` (${lacks})` : ''}; run npm install again` };
  } catch (err) {
    return { loaded: false, path, reason: `the ${name} addon at ${path} failed to load: ${(err as Error).message.split('\n')[0]}` };
  }
}
