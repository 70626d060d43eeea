/**
 * The flags of `tandem train` and `tandem profile`, generated from the option declarations: the command's own
 * (CLI_FLAGS) and every declared option that has a flag, the registered parts' and plugins' included.
 */
import { flagOf, type DeclaredOption, type OptionKind } from '../options/declaration.js';
import { declaredOptions } from '../options/option-registry.js';
import { CLI_FLAGS } from './cli-options.js';

export type FlagKind = Exclude<OptionKind, 'config'>;

export interface TrainFlag {
  /** Without dashes. */
  readonly flag: string;
  readonly kind: FlagKind;
  readonly option: DeclaredOption;
  /** A flag of the command (`--json`), not a train option. */
  readonly command: boolean;
}

function flagsOf(options: readonly DeclaredOption[], command: boolean): TrainFlag[] {
  const out: TrainFlag[] = [];
  for (const option of options) {
    const flag = flagOf(option.key, option.declaration);
    const kind = option.declaration.kind;
    if (flag !== undefined && kind !== 'config') out.push({ flag, kind, option, command });
  }
  return out;
}

const COMMAND_OPTIONS: DeclaredOption[] = Object.entries(CLI_FLAGS).map(([key, declaration]) => ({
  key,
  path: key,
  section: 'command',
  declaration,
}));

/** Every flag train parses, the command's first, then the options' in declaration order. */
export function trainFlags(): TrainFlag[] {
  return [...flagsOf(COMMAND_OPTIONS, true), ...flagsOf(declaredOptions(), false)];
}

/** Every declared option, config-only ones included, with its flag if it has one (the reference lists them all). */
export function allOptions(): { option: DeclaredOption; flag?: string }[] {
  return [...COMMAND_OPTIONS, ...declaredOptions()].map(option => ({
    option,
    flag: flagOf(option.key, option.declaration),
  }));
}
