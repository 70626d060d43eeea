/**
 * `--help` for each command, the option tables generated from the declarations (train-flags.ts), grouped as
 * horovodrun groups its arguments; the prose beside them is help-prose.ts's.
 */
import { OPTION_GROUPS, type OptionDeclaration, type OptionGroup } from '../options/declaration.js';
import { trainFlags, type TrainFlag } from './train-flags.js';
import {
  COMMANDS,
  DASHBOARD_HELP,
  LAUNCH_HELP,
  PROFILE_USAGE,
  TRACE_HELP,
  TRAIN_NOTES,
  TRAIN_USAGE,
} from './help-prose.js';

export type HelpCommand = 'train' | 'launch' | 'profile' | 'trace' | 'dashboard';

const WIDTH = 118;
const COLUMN = 34;

/** The flag's value as the help writes it: `N`, `sgd|adam|…`, none for a boolean. */
export function flagArgument(d: OptionDeclaration<unknown>): string {
  if (d.arg !== undefined) return d.arg;
  if (d.choices !== undefined) return d.choices.join('|');
  switch (d.kind) {
    case 'integer':
      return 'N';
    case 'optional-integer':
      return '[N]';
    case 'real':
      return 'X';
    case 'string':
    case 'list':
      return 'VALUE';
    case 'shape':
      return 'HxW[xC]';
    case 'boolean':
    case 'negated':
    case 'config':
      return '';
  }
}

/** `prefix` then `text`'s words, in lines of at most `width`, the later ones indented by `indent`. */
export function wrap(prefix: string, text: string, width: number, indent: string): string[] {
  const lines: string[] = [];
  let line = prefix;
  let empty = true;
  for (const word of text.split(' ')) {
    if (!empty && line.length + 1 + word.length > width) {
      lines.push(line);
      line = indent + word;
    } else line = empty ? line + word : `${line} ${word}`;
    empty = false;
  }
  lines.push(line);
  return lines;
}

function flagLine(f: TrainFlag): string[] {
  const d = f.option.declaration;
  const arg = flagArgument(d);
  const head = `  --${f.flag}${arg ? ` ${arg}` : ''}`;
  const doc =
    d.kind === 'negated'
      ? `turns off (on by default): ${d.doc}`
      : `${d.doc}${d.default !== undefined ? ` (default: ${d.default})` : ''}`;
  const indent = ' '.repeat(COLUMN);
  if (head.length >= COLUMN) return [head, ...wrap(indent, doc, WIDTH, indent)];
  return wrap(head.padEnd(COLUMN), doc, WIDTH, indent);
}

/** The heading of a group, horovodrun's way: `Schedule arguments:`. */
export function groupHeading(group: OptionGroup): string {
  return `${group[0].toUpperCase()}${group.slice(1)} arguments:`;
}

/** Every train flag, grouped in OPTION_GROUPS' order. */
export function trainOptionsHelp(flags: readonly TrainFlag[] = trainFlags()): string {
  const blocks: string[] = [];
  for (const group of OPTION_GROUPS) {
    const inGroup = flags.filter(f => f.option.declaration.group === group);
    if (inGroup.length > 0) blocks.push([groupHeading(group), ...inGroup.flatMap(flagLine)].join('\n'));
  }
  return blocks.join('\n\n');
}

/** The help of `command`, or the overview without one. */
export function helpText(command?: HelpCommand): string {
  switch (command) {
    case undefined:
      return `tandem — train TensorFlow.js models on several devices at once\n\n${COMMANDS}`;
    case 'train':
      return [TRAIN_USAGE, trainOptionsHelp(), TRAIN_NOTES, COMMANDS].join('\n\n');
    case 'profile':
      return [PROFILE_USAGE, trainOptionsHelp(), COMMANDS].join('\n\n');
    case 'launch':
      return [LAUNCH_HELP, COMMANDS].join('\n\n');
    case 'trace':
      return [TRACE_HELP, COMMANDS].join('\n\n');
    case 'dashboard':
      return [DASHBOARD_HELP, COMMANDS].join('\n\n');
  }
}
