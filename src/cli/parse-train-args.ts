/**
 * `tandem train` arguments -> TrainConfig, the flags generated from the option declarations (train-flags.ts).
 * Unknown flags and bad values are errors that name the flag.
 */
import { parseArgs } from 'node:util';
import { TandemError } from '../errors.js';
import type { TrainConfig } from '../config-types.js';
import { flagNumber } from './flag-number.js';
import { nearestName, otherToolsName } from '../nearest-name.js';
import { readConfigFile } from './read-config-file.js';
import { trainFlags, type TrainFlag } from './train-flags.js';

/**
 * verbose: a host other than 0 shows its own progress too (by default host 0 shows the world's; the others only
 * warnings, errors and their final line).
 */
export interface TrainCliOptions {
  config: TrainConfig;
  json: boolean;
  quiet: boolean;
  verbose: boolean;
  profileSteps?: number;
}

/**
 * A message of the library (`config.devices: must be …`) as the CLI shows it: the flag first, then the field
 * (`--devices (config.devices): must be …`). Messages that name no field with a flag are unchanged.
 *
 * @example
 * withFlagName('config.lr: must be > 0, got -1') // '--lr (config.lr): must be > 0, got -1'
 */
export function withFlagName(message: string): string {
  const m = /^config\.([A-Za-z]+(?:\.[A-Za-z]+)?)(\[\d+\])?([: ])/.exec(message);
  if (!m) return message;
  const flag = trainFlags().find(f => !f.command && f.option.path === m[1])?.flag;
  return flag ? `--${flag} (${message.slice(0, m[0].length - 1)})${message.slice(m[0].length - 1)}` : message;
}

type FlagValues = Record<string, string | boolean | string[] | undefined>;
/** A flag as parseArgs read it (`tokens: true`): its name and its value (undefined for a boolean flag). */
interface FlagToken {
  kind: string;
  name?: string;
  value?: string;
}

function parsed(
  argv: string[],
  flags: readonly TrainFlag[],
  command: string,
): { values: FlagValues; tokens: FlagToken[] } {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: true }> = {};
  for (const { flag, kind } of flags) {
    const boolean = kind === 'boolean' || kind === 'negated';
    options[flag] = kind === 'list' ? { type: 'string', multiple: true } : { type: boolean ? 'boolean' : 'string' };
  }
  try {
    return parseArgs({
      args: withOptionalValues(withNegativeNumbers(argv, flags), flags),
      options,
      allowPositionals: false,
      strict: true,
      tokens: true,
    }) as { values: FlagValues; tokens: FlagToken[] };
  } catch (err) {
    const meant = unknownFlagMeant(err, Object.keys(options));
    throw new TandemError('BAD_CONFIG', `tandem ${command}: ${(err as Error).message}.${meant} See tandem --help.`);
  }
}

/** ` Did you mean --steps?` for an unknown flag near a known one (`--stps`), else ''. */
function unknownFlagMeant(err: unknown, flags: readonly string[]): string {
  if ((err as { code?: unknown }).code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return '';
  const given = /'--([^'=]+)/.exec((err as Error).message)?.[1];
  if (given === 'gpus') return ' One process per GPU is tandem launch --gpus N [train flags…].';
  const meant = given === undefined ? undefined : (otherToolsName(given, flags) ?? nearestName(given, flags));
  return meant === undefined ? '' : ` Did you mean --${meant}?`;
}

/** `command` profile reads --steps as the number of measured steps, not training steps. */
export function parseTrainArgs(argv: string[], command: 'train' | 'profile' = 'train'): TrainCliOptions {
  const flags = trainFlags();
  const { values, tokens } = parsed(argv, flags, command);
  refuseRepeats(tokens, flags);
  const config: TrainConfig = typeof values.config === 'string' ? readConfigFile(values.config) : {};
  for (const f of flags) if (!f.command && values[f.flag] !== undefined) setOption(config, f, values[f.flag]!);
  if (command === 'train') refuseOutputsWithoutOut(config);
  return {
    config,
    json: values.json === true,
    quiet: values.quiet === true,
    verbose: values.verbose === true,
    profileSteps: command === 'profile' ? profileStepsOf(config) : undefined,
  };
}

/** The flag's value, as its kind reads it, into `config` (`commHookOptions.rank` for a hook's flag). */
function setOption(config: TrainConfig, f: TrainFlag, value: string | boolean | string[]): void {
  const { key, into } = f.option;
  const c = config as Record<string, unknown>;
  const target = into === undefined ? c : { ...((c[into] as Record<string, unknown> | undefined) ?? {}) };
  target[key] = flagValue(f, value, target[key]);
  if (into !== undefined) c[into] = target;
}

function flagValue(f: TrainFlag, value: string | boolean | string[], before: unknown): unknown {
  switch (f.kind) {
    case 'integer':
    case 'real':
      return flagNumber(f.flag, value as string, f.kind);
    case 'optional-integer':
      return value === '' ? true : flagNumber(f.flag, value as string, 'integer');
    case 'string':
      return value;
    case 'boolean':
      return true;
    case 'negated':
      return false;
    case 'list':
      return [...((before as string[] | undefined) ?? []), ...(value as string[])];
    case 'shape': {
      const text = value as string;
      if (!/^\d+([x,]\d+){1,2}$/.test(text))
        throw new TandemError('BAD_CONFIG', `--${f.flag} must look like 32x32 or 32x32x3, got '${text}'`);
      return text.split(/[x,]/).map(Number);
    }
  }
}

/** profile: --steps is the number of measured steps, taken out of the config. */
function profileStepsOf(config: TrainConfig): number | undefined {
  if (config.steps === undefined) return undefined;
  const profileSteps = config.steps;
  if (!Number.isInteger(profileSteps) || profileSteps < 1)
    throw new TandemError(
      'BAD_CONFIG',
      `tandem profile --steps (measured steps) must be an integer >= 1, got ${profileSteps}`,
    );
  delete config.steps;
  return profileSteps;
}

/**
 * Each flag once, but the repeatable ones: parseArgs keeps the last of two values, and the first would be dropped
 * unsaid.
 */
function refuseRepeats(tokens: FlagToken[], flags: readonly TrainFlag[]): void {
  const repeatable = new Set(flags.filter(f => f.kind === 'list').map(f => f.flag));
  const first = new Map<string, string | undefined>();
  for (const { kind, name, value } of tokens) {
    if (kind !== 'option' || name === undefined || repeatable.has(name)) continue;
    if (!first.has(name)) {
      first.set(name, value);
      continue;
    }
    const values = value === undefined ? '' : ` ('${first.get(name)}', then '${value}')`;
    throw new TandemError(
      'BAD_CONFIG',
      `--${name} is given twice${values}: give it once (only --${[...repeatable].join(', --')} may repeat)`,
    );
  }
}

/** What `train` writes only into --out: without it the run would compute it and write it nowhere. */
function refuseOutputsWithoutOut(config: TrainConfig): void {
  if (config.exportClassifier === true && config.out === undefined) {
    throw new TandemError(
      'BAD_CONFIG',
      '--export-classifier writes the full classifier into --out DIR (as DIR/classifier), and no --out was given: ' +
        'add --out DIR, or leave out --export-classifier',
    );
  }
}

/** `--devices -1` as `--devices=-1`: parseArgs would read "-1" as an option and call the argument ambiguous. */
function withNegativeNumbers(argv: string[], flags: readonly TrainFlag[]): string[] {
  const numbers = new Set(flags.filter(f => f.kind === 'integer' || f.kind === 'real').map(f => f.flag));
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i].startsWith('--') ? argv[i].slice(2) : '';
    if (numbers.has(flag) && /^-(\d|\.\d|Infinity)/.test(argv[i + 1] ?? '')) out.push(`${argv[i]}=${argv[++i]}`);
    else out.push(argv[i]);
  }
  return out;
}

/** `--dashboard` alone (at the end, or before another flag) as `--dashboard=`: the flag's value is then true. */
function withOptionalValues(argv: string[], flags: readonly TrainFlag[]): string[] {
  const optional = new Set(flags.filter(f => f.kind === 'optional-integer').map(f => `--${f.flag}`));
  return argv.map((arg, i) =>
    optional.has(arg) && (i + 1 === argv.length || argv[i + 1].startsWith('-')) ? `${arg}=` : arg,
  );
}
