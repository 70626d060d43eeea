/**
 * The registry of communication hooks (name → CommHook, duplicates refused):
 * fp16, bf16 and powersgd built in; users register theirs with
 * `registerCommHook` in a plugin module (loaded in every thread), or give a
 * module path whose default export is a CommHook.
 */
import { TandemError } from '../errors.js';
import { NamedRegistry } from '../named-registry.js';
import { importUserModule } from '../data/import-user-module.js';
import type { CommHook } from './comm-hook.js';
import { compressHook } from './hooks/compress-hook.js';
import { POWER_SGD_HOOK } from './hooks/power-sgd.js';

const hooks = new NamedRegistry<CommHook>(
  'communication hook',
  [compressHook('fp16'), compressHook('bf16'), POWER_SGD_HOOK],
  (name, known) =>
    new TandemError(
      'BAD_CONFIG',
      `communication hook '${name}' is not registered (registered: ${known.join(', ')}); ` +
        ('give a module path whose default export is a hook, or list a plugin module that calls registerCommHook in ' +
          '`plugins`'),
    ),
);

export function registerCommHook<S>(hook: CommHook<S>): void {
  checkHook(hook, 'registerCommHook');
  hooks.register(hook as CommHook);
}
export function commHookNames(): string[] {
  return hooks.names();
}
export function getCommHook(name: string): CommHook {
  return hooks.get(name);
}

/** The hook a run names: a registered one, or the default export of the module at `moduleUrl`. */
export async function loadCommHook(name: string, moduleUrl?: string): Promise<CommHook> {
  if (moduleUrl === undefined) return getCommHook(name);
  const mod = await importUserModule(moduleUrl, 'plugin');
  checkHook(mod.default, moduleUrl);
  return mod.default as CommHook;
}

function checkHook(hook: unknown, where: string): void {
  const h = hook as Partial<CommHook> | undefined;
  if (
    !h ||
    typeof h !== 'object' ||
    typeof h.name !== 'string' ||
    h.name === '' ||
    typeof h.init !== 'function' ||
    typeof h.exchange !== 'function'
  ) {
    throw new TandemError(
      'BAD_CONFIG',
      `${where}: a communication hook must be an object { name, description, init(info, options), exchange(bucket, ` +
        `state, collective) }` +
        (where.startsWith('file:') ? " as the module's default export" : ''),
    );
  }
}
