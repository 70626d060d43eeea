/**
 * Every option tandem knows: the built-in sections of `TrainConfig`, then the options the registered parts bring
 * (methods, comm hooks, transports: their `options`), then the tables plugins register for anything else (an engine's,
 * their own). The key list, the flag parser, `--help` and the reference read this, so a plugin loaded before they
 * run (the CLI loads `--plugin` modules before it parses; `resolveConfig` before it checks) adds its options to all.
 */
import { TandemError } from '../errors.js';
import { threadShared } from '../named-registry.js';
import type { AnyOptionTable, DeclaredOption, OptionSection } from './declaration.js';
import { MODEL_OPTIONS } from '../model/model-options.js';
import { DATA_OPTIONS } from '../data/data-options.js';
import { VALIDATION_OPTIONS } from '../data/validation-options.js';
import { WORLD_OPTIONS } from '../world/world-options.js';
import { ENGINE_OPTIONS } from '../engine/engine-options.js';
import { OPTIMIZER_OPTIONS, optimizerOptionTable } from '../optim/optimizer-options.js';
import { LR_SCHEDULE_OPTIONS } from '../optim/lr-schedule-options.js';
import { SCHEDULE_OPTIONS } from '../pipeline/schedule-options.js';
import { BUILTIN_HOOK_OPTIONS, COMM_HOOK_SECTION } from '../pipeline/comm-hook-options.js';
import { METHOD_SECTION } from '../methods/method-options.js';
import { CHECKPOINT_OPTIONS } from '../checkpoint/checkpoint-options.js';
import { OUTPUT_OPTIONS } from '../output/output-options.js';
import { RELIABILITY_OPTIONS } from '../monitor/reliability-options.js';
import { TENSORBOARD_OPTIONS } from '../monitor/tensorboard-options.js';
import { DASHBOARD_OPTIONS } from '../monitor/dashboard-options.js';
import { PLUGIN_OPTIONS } from '../plugins/plugin-options.js';
import { getMethod, methodNames } from '../methods/method-registry.js';
import { commHookNames, getCommHook } from '../pipeline/comm-hooks.js';
import { getTransport, transportNames } from '../collectives/transport-registry.js';
import { engineOptionTables } from '../engine/engine-registry.js';
import { CLASSIFIER_OPTION_KEYS } from '../methods/classifier-options.js';

/** The sections of `TrainConfig`, in the order the reference lists them. */
export const TRAIN_CONFIG_SECTIONS: readonly OptionSection[] = [
  { name: 'model', table: MODEL_OPTIONS },
  { name: 'data', table: DATA_OPTIONS },
  { name: 'validation', table: VALIDATION_OPTIONS },
  { name: 'world', table: WORLD_OPTIONS },
  { name: 'engine', table: ENGINE_OPTIONS },
  { name: 'optimizer', table: OPTIMIZER_OPTIONS },
  { name: 'lr schedule', table: LR_SCHEDULE_OPTIONS },
  { name: 'schedule', table: SCHEDULE_OPTIONS },
  { name: 'comm hook', table: COMM_HOOK_SECTION },
  { name: 'method', table: METHOD_SECTION },
  { name: 'checkpoint', table: CHECKPOINT_OPTIONS },
  { name: 'output', table: OUTPUT_OPTIONS },
  { name: 'tensorboard', table: TENSORBOARD_OPTIONS },
  { name: 'dashboard', table: DASHBOARD_OPTIONS },
  { name: 'reliability', table: RELIABILITY_OPTIONS },
  { name: 'plugin', table: PLUGIN_OPTIONS },
];

const CONFIG_SECTION_NAMES = new Set(TRAIN_CONFIG_SECTIONS.map(s => s.name));

/** The sections registered parts and plugins added (shared with other copies of tandem in the thread). */
const registered = threadShared('option-sections', (): OptionSection[] => []);

/**
 * A plugin's options (an engine's, or the plugin's own), top-level keys of the train config: known to the checks,
 * parsed as flags, shown by `--help`. A key or flag another option has is refused.
 */
export function registerOptions(section: OptionSection): void {
  const known = declaredOptions();
  for (const key of Object.keys(section.table)) {
    const path = section.into ? `${section.into}.${key}` : key;
    const clash = known.find(o => o.path === path);
    if (clash)
      throw new TandemError('BAD_CONFIG', `registerOptions(${section.name}): option ${path} is ${clash.section}'s`);
  }
  registered.push(section);
}

function partSections(): OptionSection[] {
  const out: OptionSection[] = [];
  const add = (name: string, table: AnyOptionTable | undefined, into?: 'commHookOptions') => {
    if (table) out.push({ name, table, ...(into ? { into } : {}) });
  };
  for (const name of methodNames()) add(`${name} method`, getMethod(name).options);
  for (const name of commHookNames())
    add(`${name} hook`, BUILTIN_HOOK_OPTIONS[name] ?? getCommHook(name).options, 'commHookOptions');
  for (const name of transportNames()) add(`${name} transport`, getTransport(name).options);
  for (const [name, table] of engineOptionTables()) add(`${name} engine`, table);
  return out;
}

/** Every section: the config's, the registered parts', the plugins'. */
export function optionSections(): OptionSection[] {
  // the optimizer section anew: a plugin's registered optimizer brings its own hyper-parameters
  const config = TRAIN_CONFIG_SECTIONS.map(s => (s.name === 'optimizer' ? { ...s, table: optimizerOptionTable() } : s));
  return [...config, ...partSections(), ...registered];
}

/** Every declared option once (parts that share one, e.g. errorFeedback of every hook: the first declaration). */
export function declaredOptions(sections: readonly OptionSection[] = optionSections()): DeclaredOption[] {
  const byPath = new Map<string, DeclaredOption>();
  for (const section of sections) {
    for (const [key, declaration] of Object.entries(section.table)) {
      const path = section.into ? `${section.into}.${key}` : key;
      if (!byPath.has(path))
        byPath.set(path, {
          key,
          path,
          section: section.name,
          declaration,
          ...(section.into ? { into: section.into } : {}),
        });
    }
  }
  return [...byPath.values()];
}

/** The top-level keys of a train config. */
export function knownKeys(): string[] {
  return declaredOptions()
    .filter(o => o.into === undefined)
    .map(o => o.key);
}

/**
 * The top-level keys whose values travel to every thread as `pluginOptions`: those of the plugins' own tables
 * (`registerOptions`) and those registered parts declare (a method's, a transport's, an engine's), but the built-in
 * classifier methods' (resolved into `classifier`).
 */
export function pluginOptionKeys(): string[] {
  const resolved = new Set<string>(CLASSIFIER_OPTION_KEYS);
  return declaredOptions()
    .filter(o => o.into === undefined && !CONFIG_SECTION_NAMES.has(o.section) && !resolved.has(o.key))
    .map(o => o.key);
}

/**
 * The values `values` gives the options of method `method` and engine `backend` (a plugin's: the math is theirs, so a
 * checkpoint's fingerprint holds them), by key; undefined when none is given.
 */
export function mathPartValues(
  method: string,
  backend: string,
  values: Readonly<Record<string, unknown>>,
): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  for (const table of [getMethod(method).options, engineOptionTables().get(backend)])
    for (const key of Object.keys(table ?? {})) if (values[key] !== undefined) out[key] = values[key];
  return Object.keys(out).length > 0 ? out : undefined;
}

/** A kind of registered part that declares top-level options of its own, as the config chooses it. */
export type PartKind = 'method' | 'transport' | 'backend';

/** The registered parts whose own `options` declare top-level option `key` (none: a plugin's registerOptions'). */
export function partsDeclaring(key: string): { kind: PartKind; name: string }[] {
  const out: { kind: PartKind; name: string }[] = [];
  for (const name of methodNames()) if (getMethod(name).options?.[key]) out.push({ kind: 'method', name });
  for (const name of transportNames()) if (getTransport(name).options?.[key]) out.push({ kind: 'transport', name });
  for (const [name, table] of engineOptionTables()) if (table[key]) out.push({ kind: 'backend', name });
  return out;
}

/** The fields of `commHookOptions` some hook declares. */
export function knownHookOptionKeys(): string[] {
  return declaredOptions()
    .filter(o => o.into === 'commHookOptions')
    .map(o => o.key);
}
