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
import { getCommHook, loadCommHook } from './comm-hooks.js';
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
    if (options !== undefined)
      bad('commHookOptions', 'given without commHook; name a hook (fp16, bf16, powersgd or a module path)');
    return undefined;
  }
  if (typeof spec !== 'string' || spec === '')
    bad('commHook', 'must be a registered hook name (fp16, bf16, powersgd) or a module path');
  const resolvedOptions = hookOptions(options);
  if (!isPath(spec)) {
    const name = getCommHook(spec).name;
    if (name === 'fp16' || name === 'bf16') {
      // PowerSGD's options would be ignored: say so instead
      const given = Object.keys(options ?? {}).filter(k => POWER_SGD_ONLY.includes(k));
      if (given.length > 0) {
        bad(
          `commHookOptions.${given[0]}`,
          `applies to the powersgd hook only, and this run's hook is ${name} (it has errorFeedback alone); ` +
            `leave out ${given.map(k => POWER_SGD_FLAGS[k]).join(', ')}, or give --comm-hook powersgd`,
        );
      }
    }
    return { name, options: resolvedOptions };
  }
  const file = path.resolve(sourcePath(spec));
  if (!existsSync(file))
    bad(
      'commHook',
      `${spec}: no such file (${file}); give a registered hook name or a path to an ES module whose default export is a hook`,
    );
  const module = pathToFileURL(file).href;
  const hook = await loadCommHook(spec, module);
  return { name: hook.name, module, options: resolvedOptions };
}

/** The options only PowerSGD reads, and their flags (`--powersgd-…`, `--no-warm-start`). */
const POWER_SGD_ONLY: readonly string[] = ['rank', 'startStep', 'minCompressionRate', 'warmStart'];
const POWER_SGD_FLAGS: Record<string, string> = {
  rank: '--powersgd-rank',
  startStep: '--powersgd-start-step',
  minCompressionRate: '--powersgd-min-compression',
  warmStart: '--no-warm-start',
};

/**
 * `options` for the hook `--comm-hook auto` picked: PowerSGD's own options dropped when it picked fp16 or bf16 (the user
 * gave them for the case it picks PowerSGD; a hook named by the user with them is refused instead).
 */
export function optionsForPickedHook(
  hook: string,
  options: Partial<CommHookOptions> | undefined,
): Partial<CommHookOptions> | undefined {
  if (options === undefined || (hook !== 'fp16' && hook !== 'bf16')) return options;
  const kept = Object.fromEntries(
    Object.entries(options).filter(([k]) => !POWER_SGD_ONLY.includes(k)),
  ) as Partial<CommHookOptions>;
  return Object.keys(kept).length > 0 ? kept : undefined;
}

function isPath(spec: string): boolean {
  return spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('file:') || /\.(m?js|cjs)$/.test(spec);
}

function hookOptions(given: unknown): CommHookOptions {
  if (given === undefined) return { ...DEFAULT_COMM_HOOK_OPTIONS };
  if (given === null || typeof given !== 'object' || Array.isArray(given))
    bad('commHookOptions', 'must be an object like { rank: 2 }');
  const o = { ...DEFAULT_COMM_HOOK_OPTIONS, ...(given as Partial<CommHookOptions>) };
  for (const key of Object.keys(given)) {
    if (!(key in DEFAULT_COMM_HOOK_OPTIONS))
      bad(`commHookOptions.${key}`, `unknown option (known: ${Object.keys(DEFAULT_COMM_HOOK_OPTIONS).join(', ')})`);
  }
  for (const key of ['errorFeedback', 'warmStart'] as const)
    if (typeof o[key] !== 'boolean')
      bad(`commHookOptions.${key}`, `must be true or false, got ${JSON.stringify(o[key])}`);
  for (const key of ['rank', 'startStep'] as const) {
    if (!Number.isInteger(o[key]) || o[key] < (key === 'rank' ? 1 : 0))
      bad(`commHookOptions.${key}`, `must be an integer >= ${key === 'rank' ? 1 : 0}, got ${JSON.stringify(o[key])}`);
  }
  if (typeof o.minCompressionRate !== 'number' || !(o.minCompressionRate >= 1))
    bad('commHookOptions.minCompressionRate', `must be a number >= 1, got ${JSON.stringify(o.minCompressionRate)}`);
  return o;
}
