/**
 * Loading one of tandem's native addons (native, gloo, shm) from its built path: what came of it, with the reason
 * a user reads when it did not load (not built, out of date, failed to load). Each addon's file caches the result
 * per thread and says how to get it.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export type AddonLoad<T> = { loaded: true; addon: T; path: string } | { loaded: false; reason: string; path: string };

const require = createRequire(import.meta.url);

/**
 * The command that runs tandem's install step (native/build-addon.mjs, which builds the addons) again for the copy of
 * tandem at `packageDir`: in a project that depends on tandem (`packageDir` under node_modules) `npm rebuild tandem`
 * (`npm install` there does not run an installed dependency's install script again), in tandem's own checkout
 * `npm install`.
 */
export function rebuildCommand(packageDir: string): string {
  return packageDir.split(/[\\/]/).includes('node_modules') ? 'npm rebuild tandem' : 'npm install';
}

/** {@link rebuildCommand} for this copy of tandem (this file is dist/src/addon-load.js). */
export const REBUILD_COMMAND = rebuildCommand(fileURLToPath(new URL('../..', import.meta.url)));

/**
 * Loads the addon `name` at `path`; `outdated` tells what a current build lacks (undefined: nothing), e.g.
 * `missing conv2dForward`, or '' when an old build is known only by a missing entry.
 */
export function loadAddonAt<T>(
  name: string,
  path: string,
  outdated: (addon: Partial<T>) => string | undefined,
): AddonLoad<T> {
  if (!existsSync(path)) return { loaded: false, path, reason: `the ${name} addon was not built (${path} is missing)` };
  try {
    const addon = require(path) as Partial<T>;
    const lacks = outdated(addon);
    return lacks === undefined
      ? { loaded: true, path, addon: addon as T }
      : {
          loaded: false,
          path,
          reason:
            `the ${name} addon at ${path} is out of date${lacks ? ` (${lacks})` : ''}; run ${REBUILD_COMMAND} ` +
            `(it builds it again)`,
        };
  } catch (err) {
    return {
      loaded: false,
      path,
      reason: `the ${name} addon at ${path} failed to load: ${(err as Error).message.split('\n')[0]}`,
    };
  }
}
