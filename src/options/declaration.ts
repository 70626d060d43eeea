/**
 * One option, declared once by the part that reads it: its config key, its type, its default, its check,
 * its command-line flag, its help group and a one-line doc. The key list, the flag parser, `--help` and
 * `docs/reference/options.md` are generated from these declarations, never typed again.
 *
 * A part declares its options as an `OptionTable<Section>`: a mapped type over the section's interface, so a
 * field of the section without a declaration is a compile error (vitest's `cli-config.ts` habit).
 */

/** The groups `--help` and the reference show, in this order (horovodrun groups its arguments the same way). */
export const OPTION_GROUPS = [
  'general',
  'model and data',
  'world',
  'engine',
  'optimizer',
  'schedule',
  'comm hook',
  'method',
  'checkpoint',
  'output',
  'reliability',
  'plugin',
] as const;
export type OptionGroup = (typeof OPTION_GROUPS)[number];

/**
 * How a flag's text becomes the value: `integer` (decimal digits), `real` (also exponent notation), `string`,
 * `boolean` (the flag alone sets true), `negated` (`--no-X` alone sets false), `list` (a repeatable flag, each
 * one added), `shape` (`32x32` or `32x32x3`), `optional-integer` (an integer, or the flag alone: true); `config`
 * options have no flag: a config file or the library only.
 */
export type OptionKind =
  'integer' | 'optional-integer' | 'real' | 'string' | 'boolean' | 'negated' | 'list' | 'shape' | 'config';

/**
 * Whether every host of a multi-host run must give an option the same value: `same` when a difference changes the
 * math (the replicas would no longer be what one engine computes on the same global batch), the world's shape or its
 * protocol, or could hang a host; `own: WHY` when it truly may differ between machines (a path, an output, a
 * dashboard, the host's rank, its verbosity, its cores), WHY saying so in one line. The hosts compare every `same`
 * option at the rendezvous (world/host-flags.ts); the reference shows the rule.
 */
export type HostAgreement = 'same' | `own: ${string}`;

/** True unless `d` declares that hosts may differ (a JavaScript plugin's declaration without the field: compared). */
export function sameOnEveryHost(d: OptionDeclaration<unknown>): boolean {
  return !(typeof d.hosts === 'string' && d.hosts.startsWith('own: '));
}

export interface OptionDeclaration<T> {
  kind: OptionKind;
  group: OptionGroup;
  /** Whether every host must give it the same value (see HostAgreement); required, so that each option decides. */
  hosts: HostAgreement;
  /** One line: what it does, for `--help` and the reference. */
  doc: string;
  /** The flag without dashes; default: the key in kebab-case (`--no-` + it for `negated`). */
  flag?: string;
  /** The values a string option takes, shown in the help (`sgd|adam|…`). */
  choices?: readonly string[];
  /** The flag's value as the help shows it (`N`, `DIR`); default: from the kind and the choices. */
  arg?: string;
  /** A `config` option's value as the reference shows it (`integer`, `object`); default: `object`. */
  type?: string;
  /** The default as the reference shows it (`2`, `native when built, else wasm`); absent: none. */
  default?: string;
  /**
   * Pure and synchronous: the given value checked (a `BAD_CONFIG` naming the field on failure), defaults not
   * applied.
   */
  check?: (value: unknown, field: string) => T;
}

/** Every field of section `S`, declared: leaving one out, or declaring one `S` lacks, does not compile. */
export type OptionTable<S> = { readonly [K in keyof Required<S>]-?: OptionDeclaration<NonNullable<S[K]>> };

/** Any part's table, as the generators read it. */
export type AnyOptionTable = { readonly [key: string]: OptionDeclaration<unknown> };

/**
 * One part's options: the built-in sections of `TrainConfig`, or those a registered part (a method, a comm hook,
 * a transport, an engine, a plugin's) brings. `into`: the options are fields of that config object
 * (`commHookOptions.rank`), not top-level keys.
 */
export interface OptionSection {
  /** Who declares them (`world`, `powersgd hook`), for the reference. */
  readonly name: string;
  readonly table: AnyOptionTable;
  readonly into?: 'commHookOptions';
}

/** One declared option with where it lives: `path` is `key` or `into.key`, as messages name it. */
export interface DeclaredOption {
  readonly key: string;
  readonly path: string;
  readonly section: string;
  readonly into?: 'commHookOptions';
  readonly declaration: OptionDeclaration<unknown>;
}

/** The flag of a declaration (without dashes), or undefined for a config-only option. */
export function flagOf(key: string, d: OptionDeclaration<unknown>): string | undefined {
  if (d.kind === 'config') return undefined;
  if (d.flag !== undefined) return d.flag;
  const kebab = key.replace(/[A-Z]/g, c => `-${c.toLowerCase()}`);
  return d.kind === 'negated' ? `no-${kebab}` : kebab;
}
