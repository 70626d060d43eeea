/**
 * One optimizer, as one config object in one file (tfjs-core keeps one gradient per file the same way): its name,
 * its own hyper-parameters declared as options, its default learning rate, how many state slots it keeps, their
 * values before the first step, its update rule on flat Float32Arrays, and the tfjs optimizer it stands for. The
 * registry (optimizer-registry.ts) holds the built-in ones and those a plugin registers; the config checks, the
 * flags, `--help` and the reference are generated from these declarations.
 */
import type { Optimizer } from '@tensorflow/tfjs';
import type { Tf } from '../engine/tfjs-types.js';
import type { NativeAddon } from '../engine/native/native-addon.js';
import type { OptionDeclaration } from '../options/declaration.js';

/** A hyper-parameter's value: a real number or a switch. */
export type HyperValue = number | boolean;

/**
 * One hyper-parameter: a train option (flag, help, reference) with its value when not given and its range. Every host
 * gives it the same value (it is in the update rule), so it declares no `hosts`.
 */
export interface HyperOption<T extends HyperValue> extends Omit<
  OptionDeclaration<T>,
  'group' | 'default' | 'kind' | 'hosts'
> {
  kind: T extends boolean ? 'boolean' : 'real';
  /** The value when the config does not give one. */
  fallback: T;
  /** Reals: the accepted range [min, max], or [min, max) with `maxOpen`. */
  range?: { min: number; max: number; maxOpen?: boolean };
  /** A value another optimizer may be given without it being refused (momentum 0 means none). */
  inert?: T;
  /** Left out of the resolved config at its fallback (sgd's `nesterov: false`): the summary shows what is on. */
  omitAtFallback?: boolean;
  /** Keys a saved model.json's optimizer config names it by, lower-cased, beside the key itself (`usenesterov`). */
  savedKeys?: readonly string[];
}

export type HyperOptions = Readonly<Record<string, HyperOption<HyperValue>>>;

/** The value type of a declared hyper-parameter. */
export type HyperValueOf<O> = O extends HyperOption<infer T> ? (T extends boolean ? boolean : number) : never;

/** What every thread receives for an optimizer: its kind, the learning rate and its hyper-parameters resolved. */
export type ResolvedOptimizer<K extends string, O extends HyperOptions> = {
  kind: K;
  lr: number;
  /**
   * The updates the optimizer made before this run's step 1 (a saved model's optimizer state, or `fit` called again):
   * its rule sees step + stepsBefore, as tfjs's optimizer counts its iterations on.
   */
  stepsBefore?: number;
} & {
  -readonly [P in keyof O as HyperValueOf<O[P]> extends boolean ? never : P]: HyperValueOf<O[P]>;
} & {
  // switches may be left out at their fallback (`omitAtFallback`)
  -readonly [P in keyof O as HyperValueOf<O[P]> extends boolean ? P : never]?: HyperValueOf<O[P]>;
};

/** A flat range update: params[start, end) from grads[start, end), `state` the slots, `step` from 1. */
export type FlatUpdate<C> = (
  config: C,
  params: Float32Array,
  grads: Float32Array,
  state: Float32Array[],
  start: number,
  end: number,
  step: number,
) => void;

export interface OptimizerDefinition<K extends string = string, O extends HyperOptions = HyperOptions> {
  /** The name a user gives (`--optimizer NAME`). */
  readonly name: string;
  /** The kind its resolved config carries: its own name, or the optimizer it is a preset of (`momentum`: sgd). */
  readonly kind: K;
  readonly options: O;
  readonly defaultLr: number;
  /** A value `fromSaved` gives a saved model's optimizer when its config leaves it out (tfjs's SGD: momentum 0). */
  readonly savedFallbacks?: Readonly<Record<string, HyperValue>>;
  /** A hint for a BAD_CONFIG refusing another optimizer's option (rmsprop's `rho`: keras's name for decay). */
  readonly foreignHints?: Readonly<Record<string, string>>;
  /** Cross-option checks after each option's own, as BAD_CONFIG naming the field. */
  check?(config: ResolvedOptimizer<K, O>): void;
  stateSlots(config: ResolvedOptimizer<K, O>): number;
  /**
   * What the tfjs optimizer it stands for names each state slot (a weight's `<name>/<suffix>`), in the order of its
   * `getWeights()`, which is the order of the slots here: the first `stateSlots` of them are kept. Absent: a saved
   * model's optimizer state, or the state `fit` hands on between calls, is not carried over (the state starts afresh).
   */
  readonly tfjsStateNames?: readonly string[];
  /** Each state slot's value before the first step (0 but for adagrad's accumulator). */
  init(config: ResolvedOptimizer<K, O>): number[];
  update(...args: Parameters<FlatUpdate<ResolvedOptimizer<K, O>>>): void;
  /** The native addon's vectorised loop, the same bits as `update`; absent: `update` runs on every engine. */
  nativeUpdate?(addon: NativeAddon, ...args: Parameters<FlatUpdate<ResolvedOptimizer<K, O>>>): void;
  /** The tfjs optimizer it stands for: what the single-engine reference trains with. */
  tfjs(tf: Tf, config: ResolvedOptimizer<K, O>): Optimizer;
  /** Appended to a non-finite loss or gradient's message when the optimizer's own rule is the likely cause. */
  nanHint?(config: ResolvedOptimizer<K, O>): string;
}

/** Types a definition's options and callbacks from what it declares. */
export function defineOptimizer<const K extends string, const O extends HyperOptions>(
  definition: OptimizerDefinition<K, O>,
): OptimizerDefinition<K, O> {
  return definition;
}

/** A real hyper-parameter. */
export function real(
  doc: string,
  fallback: number,
  range: { min: number; max: number; maxOpen?: boolean },
  extra: Partial<HyperOption<number>> = {},
): HyperOption<number> {
  return { kind: 'real', doc, fallback, range, ...extra };
}

/** A switch, off unless given. */
export function flag(doc: string, extra: Partial<HyperOption<boolean>> = {}): HyperOption<boolean> {
  return { kind: 'boolean', doc, fallback: false, ...extra };
}
