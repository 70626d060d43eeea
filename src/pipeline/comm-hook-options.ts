/**
 * The comm-hook section of a train config (`commHook`, `commHookOptions`), and the options each built-in hook
 * declares: the fields of `commHookOptions` it reads, with their flags. A plugin's hook declares its own
 * (`CommHook.options`); they join the flags, the help and the known fields the same way.
 */
import type { AnyOptionTable, OptionTable } from '../options/declaration.js';
import type { CommHookOptions } from './comm-hook.js';
import { bad } from '../config-checks.js';
import { trueOrFalse, type Check } from '../options/option-checks.js';

function integerAtLeast(min: number): Check<number> {
  return (v, field) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min)
      bad(field, `must be an integer >= ${min}, got ${JSON.stringify(v)}`);
    return v;
  };
}

const rateAtLeastOne: Check<number> = (v, field) => {
  if (typeof v !== 'number' || !(v >= 1)) bad(field, `must be a number >= 1, got ${JSON.stringify(v)}`);
  return v;
};

export interface CommHookSection {
  /**
   * What replaces the all-reduce of each exchange group: `fp16`, `bf16`, `powersgd`, a hook registered by a plugin, or
   * a module path whose default export is a hook (see comm-hook.ts). Default none: the plain all-reduce, bit for bit.
   */
  commHook?: string;
  /** Options of the hook: errorFeedback, rank, startStep, warmStart, minCompressionRate (the hook's own). */
  commHookOptions?: Partial<CommHookOptions>;
}

export const COMM_HOOK_SECTION: OptionTable<CommHookSection> = {
  commHook: {
    kind: 'string',
    group: 'comm hook',
    hosts: 'same',
    arg: 'fp16|bf16|powersgd|auto|NAME|PATH',
    default: 'none: the plain all-reduce, bit for bit',
    doc: 'what replaces the all-reduce of each group (auto: --strategy auto may pick one)',
  },
  commHookOptions: {
    kind: 'config',
    group: 'comm hook',
    hosts: 'own: each field is declared by its hook and compared by its own rule',
    doc: "the hook's options (below: their flags), e.g. { rank: 4 }",
  },
};

const errorFeedback = {
  kind: 'negated',
  group: 'comm hook',
  hosts: 'same',
  default: 'true',
  doc: 'fp16, bf16, powersgd: keep what was not sent and add it to the next step',
  check: trueOrFalse,
} as const;

/** fp16 and bf16 read errorFeedback alone. */
export const COMPRESS_HOOK_OPTIONS: OptionTable<Pick<CommHookOptions, 'errorFeedback'>> = { errorFeedback };

export const POWER_SGD_OPTIONS: OptionTable<CommHookOptions> = {
  errorFeedback,
  rank: {
    kind: 'integer',
    group: 'comm hook',
    hosts: 'same',
    flag: 'powersgd-rank',
    arg: 'R',
    default: '8',
    doc: 'powersgd: rank r of the approximation P Qᵀ',
    check: integerAtLeast(1),
  },
  startStep: {
    kind: 'integer',
    group: 'comm hook',
    hosts: 'same',
    flag: 'powersgd-start-step',
    arg: 'S',
    default: '10',
    doc: 'powersgd: steps before this one are all-reduced uncompressed',
    check: integerAtLeast(0),
  },
  warmStart: {
    kind: 'negated',
    group: 'comm hook',
    hosts: 'same',
    default: 'true',
    doc: "powersgd: start each step's power iteration from last step's Q",
    check: trueOrFalse,
  },
  minCompressionRate: {
    kind: 'real',
    group: 'comm hook',
    hosts: 'same',
    flag: 'powersgd-min-compression',
    default: '2',
    doc: 'powersgd: compress an [n, m] matrix only when n·m > X · (n + m) · r',
    check: rateAtLeastOne,
  },
};

/** The options of the built-in hooks, by hook name. */
export const BUILTIN_HOOK_OPTIONS: Readonly<Record<string, AnyOptionTable>> = {
  fp16: COMPRESS_HOOK_OPTIONS,
  bf16: COMPRESS_HOOK_OPTIONS,
  powersgd: POWER_SGD_OPTIONS,
};
