/**
 * The `commHook` and `commHookOptions` of a config, checked before any thread
 * starts: a registered hook's name or a module path (whose default export is
 * the hook, loaded here once to check it), and the options with defaults.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { TandemError } from '../errors.js';
import { DEFAULT_COMM_HOOK_OPTIONS, type CommHookOptions } from './comm-hook.js';
import { commHookNames, getCommHook, loadCommHook } from './comm-hooks.js';
import { BUILTIN_HOOK_OPTIONS } from './comm-hook-options.js';
import { flagOf, type AnyOptionTable, type OptionDeclaration } from '../options/declaration.js';
import { sourcePath } from '../source-path.js';

/** A run's hook as every thread receives it: `module` (file: URL) when it was given as a path. */
export interface ResolvedCommHook {
  name: string;
  module?: string;
  options: CommHookOptions;
}

function bad(field: string, message: string): never {
  throw new TandemError('BAD_CONFIG', `config.${field}: ${message}`);
}

export async function resolveCommHook(spec: unknown, options: unknown): Promise<ResolvedCommHook | undefined> {
  if (spec === undefined || spec === 'none') {
    if (options !== undefined) {
      // named by the option given (`config.commHookOptions.rank`), which the CLI shows with its flag (--powersgd-rank)
      const [first] = options !== null && typeof options === 'object' ? Object.keys(options) : [];
      const field = first === undefined ? 'commHookOptions' : `commHookOptions.${first}`;
      bad(field, 'given without commHook; name a hook (fp16, bf16, powersgd or a module path)');
    }
    return undefined;
  }
  if (typeof spec !== 'string' || spec === '')
    bad('commHook', 'must be a registered hook name (fp16, bf16, powersgd) or a module path');
  const resolvedOptions = hookOptions(options);
  if (!isPath(spec)) {
    const name = getCommHook(spec).name;
    refuseOthersOptions(name, options);
    return { name, options: resolvedOptions };
  }
  const file = path.resolve(sourcePath(spec));
  if (!existsSync(file))
    bad(
      'commHook',
      `${spec}: no such file (${file}); give a registered hook name or a path to an ES module whose default export ` +
        `is a hook`,
    );
  const module = pathToFileURL(file).href;
  const hook = await loadCommHook(spec, module);
  return { name: hook.name, module, options: resolvedOptions };
}

function isPath(spec: string): boolean {
  return spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('file:') || /\.(m?js|cjs)$/.test(spec);
}

/** Every field of commHookOptions some registered hook declares, with its first declaration. */
function hookDeclarations(): Map<string, OptionDeclaration<unknown>> {
  const out = new Map<string, OptionDeclaration<unknown>>();
  for (const hook of commHookNames())
    for (const [key, d] of Object.entries(declaredBy(hook) ?? {})) if (!out.has(key)) out.set(key, d);
  return out;
}

function knownHookOptionKeys(): string[] {
  return [...hookDeclarations().keys()];
}

/** The options the hook `name` declares (a built-in's, or a registered plugin hook's), if it declares them. */
function declaredBy(name: string): AnyOptionTable | undefined {
  return BUILTIN_HOOK_OPTIONS[name] ?? getCommHook(name).options;
}

/**
 * Options another hook declares, given to a hook that declares its own without them, would be ignored: refused,
 * naming the hooks that read them and their flags.
 */
function refuseOthersOptions(name: string, options: unknown): void {
  const own = declaredBy(name);
  if (own === undefined || options === null || typeof options !== 'object') return;
  const given = Object.keys(options).filter(k => !Object.hasOwn(own, k) && knownHookOptionKeys().includes(k));
  if (given.length === 0) return;
  const owners = commHookNames().filter(h => Object.hasOwn(declaredBy(h) ?? {}, given[0]));
  const flags = given.map(k => {
    const flag = flagOf(k, hookDeclarations().get(k)!);
    return flag === undefined ? `commHookOptions.${k}` : `--${flag}`;
  });
  bad(
    `commHookOptions.${given[0]}`,
    `applies to the ${owners.join(', ')} hook only, and this run's hook is ${name} ` +
      `(it has ${Object.keys(own).join(', ')} alone); leave out ${flags.join(', ')}, or give --comm-hook ${owners[0]}`,
  );
}

/**
 * The picked hook's options (strategy auto): those another hook declares and it does not are dropped, since the
 * user gave them for a hook that was not picked.
 */
export function optionsForPickedHook(
  hook: string,
  options: Partial<CommHookOptions> | undefined,
): Partial<CommHookOptions> | undefined {
  const own = declaredBy(hook);
  if (options === undefined || own === undefined) return options;
  const others = knownHookOptionKeys().filter(k => !Object.hasOwn(own, k));
  const kept = Object.fromEntries(
    Object.entries(options).filter(([k]) => !others.includes(k)),
  ) as Partial<CommHookOptions>;
  return Object.keys(kept).length > 0 ? kept : undefined;
}

/** The given options over the defaults: every key one some hook declares, each value through its declared check. */
function hookOptions(given: unknown): CommHookOptions {
  if (given === undefined) return { ...DEFAULT_COMM_HOOK_OPTIONS };
  if (given === null || typeof given !== 'object' || Array.isArray(given))
    bad('commHookOptions', 'must be an object like { rank: 2 }');
  const known = knownHookOptionKeys();
  for (const key of Object.keys(given)) {
    if (!known.includes(key)) bad(`commHookOptions.${key}`, `unknown option (known: ${known.join(', ')})`);
  }
  for (const [key, value] of Object.entries(given)) {
    hookDeclarations().get(key)?.check?.(value, `commHookOptions.${key}`);
  }
  return { ...DEFAULT_COMM_HOOK_OPTIONS, ...(given as Partial<CommHookOptions>) };
}
