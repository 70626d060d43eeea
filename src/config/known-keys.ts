/** The train config's top-level keys, generated from the declarations, and the refusal of any other. */
import { TandemError } from '../errors.js';
import { bad, shown } from '../config-checks.js';
import {
  declaredOptions,
  knownKeys,
  partsDeclaring,
  pluginOptionKeys,
  type PartKind,
} from '../options/option-registry.js';
import { flagOf } from '../options/declaration.js';
import { camelOf, nearestName, otherToolsName } from '../nearest-name.js';
import type { PluginValues } from '../plugins/step-probes.js';

/** Not an object of train options: named with what was found. */
export function refuseNonObject(config: unknown): void {
  if (config !== null && typeof config === 'object' && !Array.isArray(config)) return;
  const found =
    config === null || config === undefined
      ? String(config)
      : Array.isArray(config)
        ? 'an array'
        : `${typeof config} ${shown(config)}`;
  throw new TandemError(
    'BAD_CONFIG',
    `config: expected an object of train options (e.g. { model: 'mlp', devices: 2 }), found ${found}`,
  );
}

/** Every key of `config` declared (by a section, a registered part or a loaded plugin), else refused. */
export function refuseUnknownKeys(config: object): void {
  const known = knownKeys();
  const set = new Set(known);
  for (const key of Object.keys(config)) if (!set.has(key)) unknownOption(key, known);
}

/**
 * An option tandem does not know: a key written as a flag is (`checkpoint-every`, `held_out`, `heldout`) is named with
 * the option meant, which a --config file written from the flags gets wrong; a typo (`stpes`) with the option nearest;
 * any other with the list of options.
 */
function unknownOption(key: string, known: readonly string[]): never {
  const camel = camelOf(key);
  const meant = known.find(k => k.toLowerCase() === camel.toLowerCase());
  const near = meant === undefined ? (otherToolsName(key, known) ?? nearestName(camel, known)) : undefined;
  if (near) bad(key, `unknown option: did you mean ${near}? (known: ${known.join(', ')})`);
  if (meant)
    bad(
      key,
      `unknown option: did you mean ${meant}? (options, in a --config file too, are the API's camelCase names; ` +
        'the flags are kebab-case)',
    );
  bad(key, `unknown option (known: ${known.join(', ')})`);
}

/** The values `config` gives the options plugins declared (checked by their declarations, as given). */
export function pluginValues(config: object): PluginValues {
  const given = config as Record<string, unknown>;
  const values: Record<string, unknown> = {};
  for (const key of pluginOptionKeys()) if (given[key] !== undefined) values[key] = given[key];
  return values;
}

/**
 * An option a registered part declares (a plugin method's, transport's, engine's), given while another part of its kind
 * runs: refused, naming the part it belongs to, as it would be ignored unsaid.
 */
export function refuseOtherPartsOptions(config: object, chosen: Readonly<Record<PartKind, string>>): void {
  const given = config as Record<string, unknown>;
  for (const key of pluginOptionKeys()) {
    if (given[key] === undefined) continue;
    const parts = partsDeclaring(key);
    if (parts.length === 0 || parts.some(p => chosen[p.kind] === p.name)) continue;
    const { kind, name } = parts[0];
    const declaration = declaredOptions().find(o => o.into === undefined && o.key === key)?.declaration;
    const flag = declaration && flagOf(key, declaration);
    const owners = parts.map(p => `${p.kind} ${p.name}`).join(' or ');
    bad(
      key,
      `applies to ${owners} only, not ${kind} ${chosen[kind]}: give --${kind} ${name}, or remove ` +
        (flag ? `--${flag}` : key),
    );
  }
}
